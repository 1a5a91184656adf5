"""torchrun's variables for one rank of a trial: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` (with ``NODE_RANK``, as multi-node launchers set it),
``GROUP_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``.

Every rank gets them, whatever runs it: a train loop and a function of either style (set in the
rank's process while it runs, then put back: a warm worker runs other trials after it), and a
``program:`` script (in its own environment); on warm workers, under a ``TorchTrainer`` and in
the Tune trial's own process alike. DDP code written for torchrun
(``torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))``) then runs unchanged.
"""

from __future__ import annotations

import os

from raysweep.env import (
    GROUP_RANK,
    GROUP_WORLD_SIZE,
    LOCAL_RANK,
    LOCAL_WORLD_SIZE,
    MASTER_ADDR,
    MASTER_PORT,
    NODE_RANK,
    RANK,
    WORLD_SIZE,
)
from raysweep.placement import RankPlace
from raysweep.trial.ports import free_port


def variables(rank: int, world_size: int, place: RankPlace, master: tuple[str, int] | None) -> dict[str, str]:
    """The rank's variables; ``master``: its process group's address and port (None: the one a
    ``TorchTrainer`` worker already has, else this node and a free port, as torchrun's standalone)."""
    if master is None:
        address, port = os.environ.get(MASTER_ADDR), os.environ.get(MASTER_PORT)
        master = (address, int(port)) if address and port else ("127.0.0.1", free_port())
    return {
        RANK: str(rank),
        LOCAL_RANK: str(place.local_rank),
        WORLD_SIZE: str(world_size),
        LOCAL_WORLD_SIZE: str(place.local_world_size),
        GROUP_RANK: str(place.node_rank),
        NODE_RANK: str(place.node_rank),
        GROUP_WORLD_SIZE: str(world_size // place.local_world_size),
        MASTER_ADDR: master[0],
        MASTER_PORT: str(master[1]),
    }
