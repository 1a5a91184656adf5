"""A define-by-run space (W&B's new format, ``scheduler.search_space``): the branch chooses which
parameters exist, and the size of the trial (num_gpus) is among its choices
(tests/search/test_custom_engine.py, tests/driver/test_driver.py)."""

import optuna


def space(trial):
    model = trial.suggest_categorical("model", ["shallow", "deep"])
    if model == "shallow":
        trial.suggest_int("width", 8, 32)
        trial.suggest_int("num_gpus", 1, 1)
    else:
        trial.suggest_int("depth", 2, 6)
        trial.suggest_int("num_gpus", 2, 2)
    trial.suggest_float("x", 0.0, 1.0)
    return {"epochs": 2}  # merged into the config


class RunSuggestion:
    """W&B's shape of a search_space's answer: an object with a config."""

    def __init__(self, config):
        self.config = config


def as_suggestion(trial):
    trial.suggest_float("x", 0.0, 1.0)
    return RunSuggestion({**trial.params, "epochs": 1})


def study():
    return optuna.create_study(directions=["minimize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=3))


def not_an_optimizer():
    return 42
