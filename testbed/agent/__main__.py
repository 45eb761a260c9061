"""``python -m testbed.agent``: one node agent, started inside its site's network namespace.

Control on ``--mgmt-addr:--port`` (management network); checkpoint bytes on
``--wan-addr:--transfer-port`` (the shaped WAN). The per-run token is read from a file so it
never appears in a process listing. At start the agent raises its open-file soft limit to the hard
limit; the control server bounds its connections itself (:mod:`testbed.agent.server`). The ready
file holds ``ready <control port> <transfer port>``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testbed.agent")
    p.add_argument("--site", required=True)
    p.add_argument("--mgmt-addr", required=True)
    p.add_argument("--port", type=int, default=7100)
    p.add_argument("--wan-addr", required=True)
    p.add_argument("--transfer-port", type=int, default=7000)
    p.add_argument("--token-file", type=Path, required=True)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--ready-file", type=Path, default=None)
    p.add_argument("--run-id", default="", help="recorded for cleanup (the command line names the run)")
    p.add_argument("--warm-torch", action="store_true",
                   help="import torch and what a job's first optimizer imports (torch._dynamo) in the background "
                        "at start, so that the first start_job does not wait for seconds of imports")
    args = p.parse_args(argv)

    from testbed.agent.agent import Agent
    from testbed.agent.server import ControlServer
    from testbed.netguard.fdlimit import raise_fd_limit
    from testbed.transfer.server import TransferServer

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s agent[{args.site}] %(levelname)s %(message)s")
    soft, _ = raise_fd_limit()
    logging.getLogger("testbed.agent").setLevel(logging.INFO)
    logging.getLogger("testbed.agent").info("open-file limit %d", soft)
    token = args.token_file.read_text().strip()
    agent = Agent(args.site, args.workdir, token, run_id=args.run_id)
    control = ControlServer(args.mgmt_addr, args.port, token, agent.handlers())
    transfer = TransferServer(args.wan_addr, args.transfer_port, token=token, storage_dir=agent.incoming, fsync=False)
    transfer.start()
    stop = threading.Event()

    def _term(signum, frame):
        stop.set()
        control.stop()

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    if args.warm_torch:  # the agents of a run warm up side by side while the controller starts its steps
        threading.Thread(target=_warm_torch, name="tb-agent-warm", daemon=True).start()
    if args.ready_file:
        tmp = args.ready_file.with_name(args.ready_file.name + ".tmp")
        tmp.write_text(f"ready {control.port} {transfer.port}\n")
        tmp.replace(args.ready_file)  # whole or absent
    try:
        control.serve_forever()
    finally:
        agent.shutdown()
        transfer.stop()
    return 0


def _warm_torch() -> None:
    """What a stand-in job's first start costs once per process: torch, and torch._dynamo, which
    torch imports on the first optimizer made (seconds on a small machine). A command that needs them
    meanwhile waits for the import in progress (the interpreter's import lock), never does it twice."""
    try:
        import torch

        import testbed.nodes.job  # noqa: F401
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    except Exception:  # the job's own start reports any real problem
        logging.getLogger("testbed.agent").exception("warming torch failed")


if __name__ == "__main__":
    sys.exit(main())
