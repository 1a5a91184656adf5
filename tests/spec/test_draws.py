"""Random search draws every parameter independently, through the path ``run`` takes.

Issue 32: each parameter's stream was seeded with the first 4 bytes of its name, so
``optimizer.lr`` and ``optimizer.wd`` drew the same numbers. The draws here come from
``first_configs``: Tune's variant generator over ``tune_param_space``, as ``run`` builds it
(test_driver checks that these are the configurations ``run`` tries).

Modules: ``spec/distributions.py``, ``spec/law.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from test_spec import LAWS

from raysweep.spec import DISTRIBUTIONS, parse_spec

N = 1500
DRAWN = list(LAWS)  # the exponent laws too: W&B's schema flags them, its service and raysweep run them


def law_doc(name: str) -> dict:
    law = {k: list(v) if isinstance(v, tuple) else v for k, v in LAWS[name].items()}
    return law | ({} if name == "categorical" else {"distribution": name})


@pytest.fixture(scope="module")
def draws():
    from raysweep.search.preview import first_configs

    parameters = {f"optimizer.{law}.{half}": law_doc(law) for law in DRAWN for half in ("lr", "wd")}
    parameters["model.dropout"] = {"values": [0.1, 0.2, 0.3]}  # Tune's own choice, beside the same law
    parameters["model.depth"] = {"values": [0.1, 0.2, 0.3]}
    doc = {
        "method": "random",
        "run_cap": N,
        "metric": {"name": "m"},
        "parameters": parameters,
        "raysweep": {"train_loop": "train_loops.smoke:train"},
    }
    return first_configs(parse_spec(doc), N, seed=3)


def bins(xs: list) -> np.ndarray:
    """Each draw's class: its value when there are few, else its quartile."""
    values = np.asarray([str(x) for x in xs]) if isinstance(xs[0], str) else np.asarray(xs, dtype=float)
    distinct = np.unique(values)
    if len(distinct) <= 12:
        return np.searchsorted(distinct, values)
    return np.searchsorted(np.quantile(values, [0.25, 0.5, 0.75]), values)


def independent(xs: list, ys: list) -> float:
    a, b = bins(xs), bins(ys)
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), 1)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    return stats.chi2_contingency(table).pvalue


@pytest.mark.parametrize("law", [*DRAWN, "tune_choice"])
def test_parameters_whose_names_start_alike_draw_independently(draws, law):
    first, second = (
        ("model.dropout", "model.depth") if law == "tune_choice" else (f"optimizer.{law}.lr", f"optimizer.{law}.wd")
    )
    xs, ys = [c[first] for c in draws], [c[second] for c in draws]
    assert sum(x == y for x, y in zip(xs, ys)) < 0.9 * N, f"{first} and {second} draw the same values"
    assert independent(xs, ys) > 1e-4, f"{first} and {second} are not independent"


def test_every_law_is_covered():
    assert set(LAWS) | {"constant"} == set(DISTRIBUTIONS)
