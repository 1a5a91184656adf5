"""The ``scheduler.source`` of this folder's sweep files (W&B's new format as wandb 0.31 released
it): a conditional define-by-run space whose branch chooses the trial's size, and W&B-style
``optimizer(sweep_info)`` functions, one with a terminator."""

import optuna


def conditional(trial):
    """The config of one run: a branch chooses which parameters exist and how many GPUs it has."""
    config = {"model": trial.suggest_categorical("model", ["small", "large"]), "x": trial.suggest_float("x", 0.0, 1.0)}
    if config["model"] == "small":
        return config | {"width": trial.suggest_int("width", 8, 32), "num_gpus": 1}
    return config | {"depth": trial.suggest_int("depth", 2, 4), "num_gpus": 2}


def study(sweep_info):
    """Random draws (seeded), the sweep's goals as the study's directions."""
    goals = [m.get("goal", "minimize") for m in sweep_info.config.get("metrics", [sweep_info.config.get("metric", {})])]
    return optuna.create_study(directions=goals, sampler=optuna.samplers.RandomSampler(seed=7))


def study_with_terminator(sweep_info):
    """A TPE study and a terminator that ends the sweep after three finished runs."""
    made = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=7))
    return made, lambda s: len(s.get_trials(states=[optuna.trial.TrialState.COMPLETE])) >= 3


def client(sweep_info):
    """An Ax client configured from the sweep's config, as W&B's default one is, seeded."""
    from ax import Client, RangeParameterConfig
    from wandb.sdk.sweeps.scheduler.ax import configure_sweep_objective

    made = Client(random_seed=7)
    made.configure_experiment(parameters=[RangeParameterConfig(name="x", bounds=(0.0, 1.0), parameter_type="float")])
    configure_sweep_objective(made, sweep_info.config)
    return made
