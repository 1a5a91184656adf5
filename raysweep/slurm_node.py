"""One node of a ``raysweep slurm`` job's Ray, on ports no other job on that node holds.

Ray's fixed defaults (the GCS on 6379, the dashboard on 8265, Ray Client on 10001, each
node's dashboard agent on 52365) collide when SLURM places two jobs on one node. The batch
script asks this module, on the head, for the head's ports (``--ports N`` prints N free ones),
and starts every node through it: it adds free ports for the node's own agents and execs
``ray start --block``.

    python -m raysweep.slurm_node --ports 3
    python -m raysweep.slurm_node RAY_BIN [ray start options ...]
"""

from __future__ import annotations

import os
import socket
import sys
from contextlib import ExitStack

from raysweep.ray_settings import STARTED_RAY

# The per-node ports `ray start` would otherwise take from a fixed default or leave to chance
# among the node's own processes.
NODE_PORTS = (
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
    "--node-manager-port",
    "--object-manager-port",
)


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on this node now (held open together, so none repeats)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in sockets]


def start_args(args: list[str]) -> list[str]:
    """``ray start --block`` with ``args``, each per-node port not given in them set to a free one."""
    given = {a.split("=", 1)[0] for a in args}
    missing = [flag for flag in NODE_PORTS if flag not in given]
    return ["start", "--block", *args, *(f"{flag}={port}" for flag, port in zip(missing, free_ports(len(missing))))]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--ports"]:
        print(" ".join(map(str, free_ports(int(argv[1])))))
        return
    ray, *args = argv
    for key, value in STARTED_RAY.items():  # its GCS and raylet read them (``ray_settings.STARTED_RAY``)
        os.environ.setdefault(key, value)
    os.execv(ray, [ray, *start_args(args)])


if __name__ == "__main__":
    main(sys.argv[1:])
