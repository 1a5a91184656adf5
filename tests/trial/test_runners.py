"""The runners as records (``trial/runners.py``): every ``Runner`` word has one, each names its
own rank entry and backend, and the driver's choices come from their traits, decided once per
trial size (``driver/trainable.runners``)."""

from __future__ import annotations

import inspect

import pytest

from raysweep.driver.trainable import runners
from raysweep.spec import parse_spec
from raysweep.trial import rank
from raysweep.trial.backends import Backend
from raysweep.trial.runners import RUNNERS
from raysweep.words import Runner

GRID = {"method": "grid", "parameters": {"num_gpus": {"values": [1, 2, 4]}}}


def test_every_runner_word_has_one_record_with_its_own_entry_and_backend():
    assert set(RUNNERS) == set(Runner) and all(kind.word == word for word, kind in RUNNERS.items())
    entries = [kind.rank_entry for kind in RUNNERS.values()]
    backends = [kind.backend for kind in RUNNERS.values()]
    assert len(set(entries)) == len(entries) and len(set(backends)) == len(backends)
    assert all(inspect.getmodule(entry) is rank for entry in entries)  # where each rank runs
    assert all(issubclass(backend, Backend) for backend in backends)


def test_the_traits_say_what_the_driver_used_to_work_out_from_the_name():
    warm, train, alone = RUNNERS[Runner.WARM], RUNNERS[Runner.TORCHTRAINER], RUNNERS[Runner.IN_PROCESS]
    assert [k.needs_pool for k in (warm, train, alone)] == [True, False, False]
    assert [k.holds_workers for k in (warm, train, alone)] == [True, False, True]  # Ray Train places its own
    assert [k.reuses_tune_actor for k in (warm, train, alone)] == [True, False, True]
    assert [k.places_own_slots for k in (warm, train, alone)] == [True, False, False]
    assert [k.in_trial_process for k in (warm, train, alone)] == [False, False, True]
    assert [k.one_worker_in_process for k in (warm, train)] == [False, True]  # Ray Train for one rank: not worth it


@pytest.mark.parametrize(
    "keys, expected",
    [
        ({"raysweep": {"train_loop": "m:f"}}, {1: Runner.WARM, 2: Runner.WARM, 4: Runner.WARM}),
        (
            {"raysweep": {"train_loop": "m:f", "ddp_workers": "torchtrainer"}},
            {1: Runner.IN_PROCESS, 2: Runner.TORCHTRAINER, 4: Runner.TORCHTRAINER},
        ),
        ({"program": "t.py"}, {1: Runner.IN_PROCESS, 2: Runner.WARM, 4: Runner.WARM}),  # one script: the trial's own
    ],
)
def test_the_driver_picks_one_runner_per_size_from_ddp_workers(keys, expected):
    """Issue 45: the runner was decided three times, twice from ``worker_pool is not None``; now once per size."""
    assert runners(parse_spec(GRID | keys)) == expected


def test_one_worker_torchtrainer_runs_ray_trains_one_gpu_path(monkeypatch):
    monkeypatch.setenv("RAYSWEEP_ONE_WORKER_TORCHTRAINER", "1")
    spec = parse_spec(GRID | {"raysweep": {"train_loop": "m:f", "ddp_workers": "torchtrainer"}})
    assert runners(spec)[1] == Runner.TORCHTRAINER
