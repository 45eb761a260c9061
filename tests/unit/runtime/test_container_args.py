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


def test_the_host_cgroup_tree_is_shared_writable_so_throttles_work_inside():
    args = ContainerNode(_Engine(), "rome", "tb-abc123-s-rome", ["true"], image="img").create_args()
    assert args[args.index("--cgroupns") + 1] == "host"
    volumes = [args[i + 1] for i, a in enumerate(args) if a == "-v"]
    assert "/sys/fs/cgroup:/sys/fs/cgroup" in volumes  # no ":ro"
    assert args.index("--cgroupns") < args.index("img")  # an option of create, not of the command
