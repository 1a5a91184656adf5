"""A define-by-run space (W&B's new format, ``scheduler.search_space``): the branch chooses which
parameters exist, and the size of the trial (num_gpus) is among its choices. It returns the
trial's config, as W&B's sweep scheduler requires (the dict becomes the run's config); and the
scheduler's ``optimizer`` functions W&B takes and refuses (tests/search/test_wandb_engine.py,
tests/driver/test_driver.py)."""

import optuna


def space(trial):
    config = {"model": trial.suggest_categorical("model", ["shallow", "deep"])}
    if config["model"] == "shallow":
        config |= {"width": trial.suggest_int("width", 8, 32), "num_gpus": 1}
    else:
        config |= {"depth": trial.suggest_int("depth", 2, 6), "num_gpus": trial.suggest_int("num_gpus", 2, 2)}
    return config | {"x": trial.suggest_float("x", 0.0, 1.0), "epochs": 2}


def suggests_only(trial):
    """A space in raysweep's older style: it suggests and returns nothing (W&B refuses it at start)."""
    trial.suggest_float("x", 0.0, 1.0)


def study(sweep_info):
    """W&B's optimizer(sweep_info): two objectives, minimized, random draws."""
    return optuna.create_study(directions=["minimize", "minimize"], sampler=optuna.samplers.RandomSampler(seed=3))


def study_and_terminator(sweep_info):
    """A study and a terminator that ends the sweep once three trials are complete."""
    made = optuna.create_study(direction="minimize", sampler=optuna.samplers.RandomSampler(seed=3))

    def enough(s):
        return len(s.get_trials(states=[optuna.trial.TrialState.COMPLETE])) >= 3

    return made, enough


def maximizing(sweep_info):
    """A study whose direction disagrees with a sweep that minimizes."""
    return optuna.create_study(direction="maximize")


def a_sampler(sweep_info):
    """A sampler, not a Study: raysweep took one before W&B released its scheduler; W&B refuses it."""
    return optuna.samplers.TPESampler(seed=1)


def no_arguments():
    """An optimizer of no arguments, as the PR texts had it; W&B passes the sweep's SweepInfo."""
    return optuna.create_study()


def pruning(sweep_info):
    """A study whose pruner stops a trial at its second report unless it is the best so far."""
    return optuna.create_study(
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=1),
    )
