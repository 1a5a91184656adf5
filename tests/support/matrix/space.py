"""The conditional define-by-run space of tests/end_to_end/test_matrix*.py (``scheduler.search_space``):
the branch chooses the trial's size; the dict it returns is the run's config (W&B's release)."""


def _space(trial, largest: int) -> dict:
    config = {"x": trial.suggest_float("x", 0.0, 1.0), "epochs": 2, "sleep": 0.5}
    if trial.suggest_categorical("model", ["small", "large"]) == "small":
        return config | {"model": "small", "width": trial.suggest_int("width", 8, 16), "num_gpus": 1}
    return config | {"model": "large", "depth": trial.suggest_int("depth", 2, 3), "num_gpus": largest}


def sizes_1(trial) -> dict:
    return _space(trial, 1)


def sizes_2(trial) -> dict:
    return _space(trial, 2)
