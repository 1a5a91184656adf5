"""A Hydra app, run unchanged by raysweep's tests with ``${args_no_hyphens}`` (``lr=0.1 model.depth=2``).

It reports with ``raysweep.report`` instead of W&B (the other way a script can talk to the sweep).
"""

from dataclasses import dataclass, field

import hydra
from hydra.core.config_store import ConfigStore

import raysweep


@dataclass
class Model:
    depth: int = 1
    width: int = 8


@dataclass
class Config:
    lr: float = -1.0
    epochs: int = 2
    model: Model = field(default_factory=Model)


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> None:
    for epoch in range(1, cfg.epochs + 1):
        raysweep.report({"score": (cfg.lr - 0.3) ** 2 + cfg.model.depth + 1.0 / epoch, "depth": cfg.model.depth, "epoch": epoch})


if __name__ == "__main__":
    main()
