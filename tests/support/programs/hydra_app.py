"""A Hydra app, run unchanged by raysweep's tests with ``${args_no_hyphens}`` (``lr=0.1 model.depth=2``,
``arch.stages.0.repeat=3``: the stages sweep of the project's origin, dotted overrides into a list).

It reports with ``raysweep.report`` instead of W&B (the other way a script can talk to the sweep),
and writes the arguments it received to ``argv.rank<RANK>.json`` in the trial's dir (the metrics
file raysweep names lives under it).
"""

import json
import os
import sys
from dataclasses import dataclass, field

import hydra
from hydra.core.config_store import ConfigStore

import raysweep


@dataclass
class Model:
    depth: int = 1
    width: int = 8


@dataclass
class Stage:
    repeat: int = 1
    include_inputs: bool = True


@dataclass
class Arch:
    stages: list = field(default_factory=lambda: [Stage(), Stage(), Stage(include_inputs=False)])


@dataclass
class Config:
    lr: float = -1.0
    epochs: int = 2
    model: Model = field(default_factory=Model)
    arch: Arch = field(default_factory=Arch)


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> None:
    trial_dir = os.path.dirname(os.path.dirname(os.environ.get("RAYSWEEP_METRICS_FILE", "./metrics/x")))
    with open(os.path.join(trial_dir, f"argv.rank{os.environ.get('RANK', '0')}.json"), "w") as f:
        json.dump(sys.argv[1:], f)
    extra = sum(stage.repeat - 1 for stage in cfg.arch.stages)  # 0 with the default stages
    for epoch in range(1, cfg.epochs + 1):
        raysweep.report(
            {
                "score": (cfg.lr - 0.3) ** 2 + cfg.model.depth + extra + 1.0 / epoch,
                "depth": cfg.model.depth,
                "repeats": extra,
                "epoch": epoch,
            }
        )


if __name__ == "__main__":
    main()
