"""The sweep spec: W&B sweep YAML plus raysweep's keys, validated at the door."""

from raysweep.spec.distributions import DISTRIBUTIONS
from raysweep.spec.model import Metric, Resources, Scheduler, SweepSpec
from raysweep.spec.param import Param
from raysweep.spec.parse import load_spec, parse_spec
from raysweep.spec.space import grid_points, optuna_space, sample_points, trial_config, tune_param_space

__all__ = [
    "DISTRIBUTIONS",
    "Metric",
    "Param",
    "Resources",
    "Scheduler",
    "SweepSpec",
    "grid_points",
    "load_spec",
    "optuna_space",
    "parse_spec",
    "sample_points",
    "trial_config",
    "tune_param_space",
]
