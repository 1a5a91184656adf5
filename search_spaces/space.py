"""The space of search_spaces/digits_conditional.yaml (W&B's new sweep format, engine optuna):
a function of an Optuna trial whose ``suggest_*`` calls are the space, returning the trial's
config (the dict W&B's sweep scheduler makes the run's config). A branch chooses which parameters
exist, and the trial's size (``num_gpus``) is among its choices."""


def search_space(trial):
    config = {"lr": trial.suggest_float("lr", 1e-4, 3e-2, log=True), "depth": trial.suggest_int("depth", 1, 3)}
    if config["depth"] == 1:  # wide and shallow: no dropout, one worker
        config["hidden"] = trial.suggest_int("hidden", 256, 512, step=256)
        return config | {"dropout": 0.0, "num_gpus": 1}
    config["hidden"] = trial.suggest_int("hidden", 32, 128, step=32)  # deeper and narrower, with dropout
    config["dropout"] = trial.suggest_float("dropout", 0.0, 0.5)
    config["num_gpus"] = trial.suggest_int("num_gpus", 1, 2)  # on 1 or 2 workers
    return config
