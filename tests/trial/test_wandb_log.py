"""``raysweep/trial/wandb_log.py``: what a trial reports of its ``wandb.log`` calls (a script's,
through its hook; a W&B-style function's, through the teed ``wandb.log``)."""

from __future__ import annotations

import math

import numpy as np
import torch

from raysweep.trial.wandb_log import LoggedReports, numbers


def test_only_numbers_and_0d_tensors_are_reported_and_nan_stays():
    logged = {
        "loss": torch.tensor(0.5),
        "acc": np.float32(0.25),
        "step": 3,
        "lr": float("nan"),
        "done": True,  # a boolean is no metric
        "image": np.zeros((2, 2)),  # nor an array
        "name": "x",
        7: 1.0,
    }
    out = numbers(logged)
    assert set(out) == {"loss", "acc", "step", "lr", "7"}
    assert out["loss"] == 0.5 and out["acc"] == 0.25 and math.isnan(out["lr"])
    assert all(type(v) in (int, float) for v in out.values())


def test_each_call_that_logs_the_metric_is_one_report_with_everything_logged_so_far():
    reports = LoggedReports("score")
    assert reports.add({"lr": 0.1}) is None  # no metric yet: remembered, not reported
    assert reports.add({"score": 1.0}) == {"lr": 0.1, "score": 1.0}
    assert reports.add({"lr": 0.05, "score": 0.5}) == {"lr": 0.05, "score": 0.5}
    assert reports.count == 2 and reports.latest == {"lr": 0.05, "score": 0.5}
    any_call = LoggedReports(None)  # a sweep without a metric: every call with numbers reports
    assert any_call.add({"x": 1}) == {"x": 1} and any_call.add({}) is None and any_call.count == 1
