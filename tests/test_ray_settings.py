"""The Ray and Tune settings the driver makes (``ray_settings.py``), in this process, with no Ray:
a user's own value of a shared setting stands, the driver's own settings are always made, and the
pending-trials limit is one sweep's, not inherited by the process's next sweep."""

from __future__ import annotations

import os

import pytest

from raysweep import ray_settings
from raysweep.env import PENDING_TRIALS, PG_RETRY_MAX, PG_RETRY_MIN, TRAIN_POLL


@pytest.fixture
def environ(monkeypatch):
    """Whatever a test sets in ``os.environ`` is undone after it."""
    for key in (*ray_settings.DEFAULTS, *ray_settings.DRIVER, *ray_settings.STARTED_RAY, PENDING_TRIALS):
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_a_users_value_stands_and_the_workers_get_the_shared_settings_as_set(environ):
    environ.setenv(TRAIN_POLL, "2")
    environ.setenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", "0")
    share = ray_settings.apply()
    assert share == ray_settings.DEFAULTS | {TRAIN_POLL: "2"}  # what every worker process gets
    assert os.environ["TUNE_DISABLE_STRICT_METRIC_CHECKING"] == "1"  # the driver's own: always set
    assert not set(ray_settings.DRIVER) & set(share)


def test_the_gcs_settings_are_in_the_drivers_environment_for_an_embedded_ray_and_a_users_value_stands(environ):
    """The embedded Ray's GCS inherits the driver's environment at ``ray.init``; the workers need none of it."""
    environ.setenv(PG_RETRY_MAX, "200")
    share = ray_settings.apply()
    assert os.environ[PG_RETRY_MIN] == "10" and os.environ[PG_RETRY_MAX] == "200"
    assert not set(ray_settings.STARTED_RAY) & set(share)


@pytest.mark.skipif(PENDING_TRIALS in os.environ, reason="the user's own limit stands for every sweep")
def test_the_pending_trials_limit_is_one_sweeps(environ):
    ray_settings.pending_trials(1)
    assert os.environ[PENDING_TRIALS] == "1"
    ray_settings.pending_trials(None)  # the next sweep: Tune's own rule again
    assert PENDING_TRIALS not in os.environ
