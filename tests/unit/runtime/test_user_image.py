"""Your own container per site, without an engine: the spec fields and their errors, the cache
keys, which kind of tar, the verdict on an image that cannot run the agent, the GPU request, and
the container's arguments."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest
import yaml

from testbed.cli import main
from testbed.runtime.container import ContainerNode
from testbed.runtime.gpus import gpu_request
from testbed.runtime.user_image import (UserImageError, context_key, probe_verdict, repo_name, tar_key, tar_kind,
                                        PROBE_MARK)
from testbed.spec import scenario_from_dict
from testbed.spec.images import ImageSource, site_image_sources
from tests.conftest import ROOT, small_scenario_dict

DOCKER = {"runtime": "docker", "nodes": "agents"}


def _context(tmp_path):
    ctx = tmp_path / "image"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM testbed-base\nCOPY lib.py /opt/lib.py\n")
    (ctx / "lib.py").write_text("X = 1\n")
    return ctx


def _validate(tmp_path, capsys, emulation: dict) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario_dict(emulation=emulation)))
    rc = main(["validate", str(path)])
    return rc, capsys.readouterr().err


def test_paths_resolve_from_the_scenario_folder_and_sites_may_override(tmp_path):
    ctx = _context(tmp_path)
    _tar(tmp_path / "b.tar", ["./etc/hostname"])
    em = {**DOCKER, "image": {"dockerfile": "image/Dockerfile"},
          "site_images": {"b": {"tar": "b.tar", "tag": "my-b"}}}
    sc = scenario_from_dict(small_scenario_dict(emulation=em), tmp_path)
    assert sc.emulation.image.dockerfile == str(ctx / "Dockerfile")
    got = site_image_sources(sc.emulation, ["a", "b"])
    assert got["a"] == ("emulation.image", sc.emulation.image)
    assert got["b"][0] == "emulation.site_images.b" and got["b"][1].tar == str(tmp_path / "b.tar")
    assert site_image_sources(scenario_from_dict(small_scenario_dict(emulation=DOCKER), tmp_path).emulation,
                              ["a"]) == {}


@pytest.mark.parametrize("emulation, expected", [
    ({**DOCKER, "image": {"dockerfile": "nope/Dockerfile"}}, "emulation.image.dockerfile: no such file"),
    ({**DOCKER, "image": {"tar": "."}}, "emulation.image.tar: "),
    ({**DOCKER, "image": {"tar": "image/lib.py"}}, "emulation.image.tar: not a readable tar file"),
    ({**DOCKER, "image": {}}, "emulation.image: give 'dockerfile' or 'tar', one of them"),
    ({**DOCKER, "image": {"dockerfile": "image/Dockerfile", "tar": "x.tar"}}, "give 'dockerfile' or 'tar'"),
    ({**DOCKER, "image": {"dockerfile": "image/Dockerfile", "tag": "Bad:Tag"}}, "emulation.image.tag"),
    ({**DOCKER, "site_images": {"zz": {"dockerfile": "image/Dockerfile"}}}, "emulation.site_images.zz: no site 'zz'"),
    ({"nodes": "agents", "image": {"dockerfile": "image/Dockerfile"}},
     "emulation.image: an image is for containers: set emulation.runtime: docker"),
    ({**DOCKER, "image": {"dockerfile": "image/Dockerfile", "context": "."}}, "emulation.image.context"),
])
def test_bad_image_fields_name_the_file_and_field(tmp_path, capsys, emulation, expected):
    _context(tmp_path)
    rc, err = _validate(tmp_path, capsys, emulation)
    assert rc == 2 and expected in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert lines and all(str(tmp_path / "s.yaml") in ln for ln in lines) and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image", "s.yaml"]  # nothing made


def test_a_scenario_with_programs_validates_under_the_docker_runtime(tmp_path, capsys):
    _context(tmp_path)
    d = small_scenario_dict(emulation={**DOCKER, "image": {"dockerfile": "image/Dockerfile"}})
    d["workloads"]["jobs"][0]["family"] = "f"
    d["workloads"]["programs"] = {"f": {"command": ["python3", "/opt/t.py"]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0, capsys.readouterr().err


def test_example_scenario_validates():
    assert main(["validate", str(ROOT / "examples" / "containers" / "user_image.yaml")]) == 0


def test_context_key_follows_content_mode_and_base_not_mtime(tmp_path):
    ctx = _context(tmp_path)
    df = ctx / "Dockerfile"
    k = context_key(df, "base1")
    assert k == context_key(df, "base1") and len(k) == 16
    os.utime(ctx / "lib.py", (1, 1))
    assert context_key(df, "base1") == k                      # a touch is no change
    assert context_key(df, "base2") != k                      # another base image recipe
    (ctx / "lib.py").write_text("X = 2\n")
    k2 = context_key(df, "base1")
    assert k2 != k                                            # a file's bytes
    (ctx / "lib.py").chmod(0o755)
    k3 = context_key(df, "base1")
    assert k3 != k2                                           # its executable bit
    (ctx / "sub").mkdir()
    k4 = context_key(df, "base1")
    assert k4 != k3                                           # a new folder
    (ctx / "sub" / "data").write_bytes(b"\0")
    assert context_key(df, "base1") != k4                     # a new file
    (tmp_path / "outside.txt").write_text("not in the context")
    assert context_key(df, "base1") == context_key(df, "base1")


def _tar(path, names: list[str]):
    with tarfile.open(path, "w") as tf:
        for name in names:
            data = b"{}"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_tar_kind_and_key(tmp_path):
    saved = _tar(tmp_path / "saved.tar", ["a" * 64 + "/layer.tar", "manifest.json", "repositories"])
    oci = _tar(tmp_path / "oci.tar", ["blobs/sha256/ab", "index.json", "oci-layout"])
    rootfs = _tar(tmp_path / "rootfs.tar", ["./", "./etc/hostname", "./usr/bin/env"])
    assert tar_kind(saved) == "image" and tar_kind(oci) == "image" and tar_kind(rootfs) == "rootfs"
    with pytest.raises(UserImageError, match="neither"):
        tar_kind(_tar(tmp_path / "odd.tar", ["hello.txt"]))
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 100)
    with pytest.raises(UserImageError, match="not a readable tar"):
        tar_kind(tmp_path / "junk.tar")
    k = tar_key(rootfs)
    _tar(rootfs, ["./", "./etc/hostname", "./usr/bin/env", "./usr/bin/sh"])
    assert tar_key(rootfs) != k


def test_image_names():
    assert repo_name(ImageSource(dockerfile="/x/My Trainer/Dockerfile")) == "testbed-user-my-trainer"
    assert repo_name(ImageSource(tar="/x/base-image.tar.gz")) == "testbed-user-base-image"
    assert repo_name(ImageSource(tar="/x/a.tar", tag="lab/trainer")) == "lab/trainer"


def test_probe_verdicts_say_why_in_one_line():
    ok = PROBE_MARK + json.dumps({"tools": [], "libs": []})
    assert probe_verdict(0, ok + "\n", "") is None
    no_tools = PROBE_MARK + json.dumps({"tools": ["nsenter", "setpriv"], "libs": []})
    assert "no nsenter and no setpriv" in probe_verdict(0, no_tools, "")
    assert "libstdc++6" in probe_verdict(0, PROBE_MARK + json.dumps({"tools": [], "libs": ["libstdc++.so.6"]}), "")
    glibc = "/root/.pyenv/versions/3.11.7/bin/python3.11: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found"
    assert "older than the host's" in probe_verdict(1, "", glibc) and "GLIBC_2.34" in probe_verdict(1, "", glibc)
    no_ld = ('docker: Error response from daemon: failed to create shim: OCI runtime create failed: exec: '
             '"/work/main/.venv/bin/python": stat /work/main/.venv/bin/python: no such file or directory')
    assert "cannot start in it" in probe_verdict(127, "", no_ld)
    assert "cannot import the agent" in probe_verdict(1, "", "Traceback\nModuleNotFoundError: No module named 'x'")
    assert "exited 3" in probe_verdict(3, "", "boom")
    for v in (probe_verdict(1, "", glibc), probe_verdict(127, "", no_ld)):
        assert "\n" not in v


def test_gpu_request_and_note():
    assert gpu_request(0) == (None, None)
    assert gpu_request(2, hook="/usr/bin/nvidia-container-runtime-hook") == ("all", None)
    gpus, note = gpu_request(2, hook="")
    assert gpus is None and "nvidia-container-toolkit" in note and "without GPUs" in note


class _Engine:
    run_id = "abc123"


def test_container_overrides_the_images_entrypoint_and_user():
    args = ContainerNode(_Engine(), "rome", "tb-abc123-s-rome", ["python3", "-V"], image="img").create_args()
    i = args.index("img")
    assert args[args.index("--entrypoint") + 1] == "nsenter" and args[args.index("--user") + 1] == "0:0"
    assert args.index("--entrypoint") < i and args[i + 1].startswith("--net=") and args[-2:] == ["python3", "-V"]
