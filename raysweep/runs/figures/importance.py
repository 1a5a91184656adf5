"""Parameter importance: Optuna's fANOVA over the trials, from the run dir's study or one rebuilt from its rows."""

from __future__ import annotations

from typing import Any

from raysweep.runs.figures.common import choice_labels, label, varying_params
from raysweep.runs.files import OPTUNA_JOURNAL
from raysweep.runs.record import SweepRecord
from raysweep.spec import SweepSpec
from raysweep.values import finite_number
from raysweep.words import FINISHED


def importance_figure(sweep: SweepRecord) -> tuple[Any, str]:
    import optuna
    import plotly.graph_objects as go

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study, source = _study(sweep)
    if study is None:
        return None, source
    finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    params = [
        p
        for p in dict.fromkeys(k for t in finished for k in t.params)
        if len({repr(t.params.get(p)) for t in finished}) > 1
    ]
    if len(finished) < 2 or len(params) < 2:
        return (
            None,
            f"Skipped: needs 2+ finished trials and 2+ varying parameters (has {len(finished)} and {len(params)}).",
        )
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    try:
        importances = optuna.importance.get_param_importances(study, evaluator=evaluator, params=params)
    except RuntimeError as e:  # fANOVA on trials that all scored the same: "zero total variance"
        return None, f"Skipped: Optuna could not rank the parameters ({e})."
    names = list(importances)[::-1]  # most important on top
    values = [importances[n] for n in names]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            marker_color="#4c78a8",
            text=[f"{v:.3f}" for v in values],
            textposition="outside",
            cliponaxis=False,
        )
    )
    fig.update_layout(
        height=140 + 40 * len(names),
        xaxis={"title": "importance (fANOVA, sums to 1)", "range": [0, 1.08]},
        yaxis={"ticksuffix": "  "},
        margin={"l": 160},
    )
    return fig, f"Optuna's get_param_importances over {len(finished)} finished trials, from {source}."


def _study(sweep: SweepRecord) -> tuple[Any, str]:
    """The sweep's Optuna study: its journal when there is one, else one built from finished trials."""
    import optuna

    journal = sweep.run_dir / OPTUNA_JOURNAL
    if journal.exists():
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage = JournalStorage(JournalFileBackend(str(journal)))
        names = optuna.get_all_study_names(storage)
        name = sweep.spec.name if sweep.spec.name in names else (names[0] if names else None)
        if name is not None:
            return optuna.load_study(study_name=name, storage=storage), f"the sweep's study ({OPTUNA_JOURNAL})"
    if not sweep.metric:
        return None, "Skipped: the sweep has no metric."
    finished = [t for t in sweep.trials if t.status in FINISHED and finite_number(t.metric)]
    params = varying_params(sweep, finished)
    study = optuna.create_study(direction=sweep.goal)
    dists = {name: _distribution(sweep.spec, name, [t.config.get(name) for t in finished]) for name in params}
    for t in finished:
        values = {
            n: label(t.config.get(n))
            if isinstance(d, optuna.distributions.CategoricalDistribution)
            else t.config.get(n)
            for n, d in dists.items()
        }
        study.add_trial(optuna.trial.create_trial(params=values, distributions=dists, value=t.metric))
    return study, "a study built from the finished trials"


def _distribution(spec: SweepSpec, name: str, values: list[Any]) -> Any:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    param = spec.param(name)
    kind = param.distribution if param is not None else ""
    if kind == "categorical" or not all(finite_number(v) for v in values):
        return CategoricalDistribution(choice_labels(spec, name, values))
    low, high = min(values), max(values)
    log = "log" in kind and low > 0
    if all(isinstance(v, int) for v in values):
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(float(low), float(high), log=log)
