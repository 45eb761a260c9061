"""Container command generation (no engine needed)."""

from __future__ import annotations

from testbed.runtime.container import ContainerNode


class _Engine:
    run_id = "abc123"


def test_gpu_device_request_and_labels():
    node = ContainerNode(_Engine(), "rome", "tb-abc123-s-rome", ["python3", "-V"], image="img", gpus="all")
    args = node.create_args()
    assert args[args.index("--gpus") + 1] == "all"
    assert "testbed.run=abc123" in args and args[args.index("--network") + 1] == "none"
    assert "--gpus" not in ContainerNode(_Engine(), "rome", "tb-abc123-s-rome", ["true"], image="img").create_args()
