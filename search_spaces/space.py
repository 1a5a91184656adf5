"""The space of search_spaces/digits_conditional.yaml (W&B's new sweep format, engine optuna):
a function of an Optuna trial whose ``suggest_*`` calls are the space. A branch chooses which
parameters exist, and the trial's size (``num_gpus``) is among its choices."""


def search_space(trial):
    trial.suggest_float("lr", 1e-4, 3e-2, log=True)
    depth = trial.suggest_int("depth", 1, 3)
    if depth == 1:  # wide and shallow: no dropout, one worker
        trial.suggest_int("hidden", 256, 512, step=256)
        trial.suggest_int("num_gpus", 1, 1)
        return {"dropout": 0.0}  # merged into the trial's config
    trial.suggest_int("hidden", 32, 128, step=32)  # deeper and narrower, with dropout, on 1 or 2 workers
    trial.suggest_float("dropout", 0.0, 0.5)
    trial.suggest_int("num_gpus", 1, 2)
    return None
