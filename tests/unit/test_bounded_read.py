"""bounded_read.read_bounded: the one reader of small data files (I/O model calibrations, compute profiles)."""

import pytest

from testbed.bounded_read import read_bounded
from testbed.io_model import IoModelError, load_io_model
from testbed.spec.compute_profile import ComputeProfileError, load_profile


class _Problem(Exception):
    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


def test_reads_a_file_within_the_limit(tmp_path):
    p = tmp_path / "a.json"
    p.write_bytes(b"{}")
    assert read_bounded(p, 1 << 20, "a thing", _Problem) == b"{}"


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.json", "file not found"),
    (lambda d: d, "is not a regular file"),
])
def test_refuses_what_is_not_a_file(tmp_path, make, message):
    with pytest.raises(_Problem) as e:
        read_bounded(make(tmp_path), 1 << 20, "a thing", _Problem)
    assert e.value.message == message and e.value.where == str(make(tmp_path))


def test_refuses_a_file_over_the_limit_without_quoting_it(tmp_path):
    p = tmp_path / "big.json"
    p.write_bytes(b"SECRET" * ((2 << 20) // 6 + 1))
    with pytest.raises(_Problem) as e:
        read_bounded(p, 1 << 20, "a thing", _Problem)
    assert e.value.message == "is over the 1 MB limit of a thing" and "SECRET" not in str(e.value)


def test_both_users_keep_their_words(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((4 << 20) + 1))
    with pytest.raises(IoModelError, match="over the 4 MB limit of a calibration file"):
        load_io_model(big, downtime_s=1.0)
    with pytest.raises(ComputeProfileError, match="over the 1 MB limit of a compute profile"):
        load_profile(big)
    with pytest.raises(ComputeProfileError, match="file not found"):
        load_profile(tmp_path / "none.json")
    with pytest.raises(IoModelError, match="is not a regular file"):
        load_io_model(tmp_path, downtime_s=1.0)
