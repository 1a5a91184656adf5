"""The warm pool's lending rules (``pool.Lending``), driven by hand with no Ray: workers are
plain names, started and ended by two recording functions. Each branch of ``take`` has a
sequence that forces it, so lending any idle worker (one CUDA context per worker broken) fails
here, where a sweep that happens never to need a cross-GPU lend would not (issue 44)."""

from __future__ import annotations

import itertools

import pytest

from raysweep.trial.cpu_threads import RankThreads, ThreadCount, ThreadShare, threads_on_node
from raysweep.trial.pool import Lending


class Workers:
    """Names for new workers per node (``A1``, ``A2``, ``B1``...), and the ones ended."""

    def __init__(self) -> None:
        self.counters: dict[str, itertools.count] = {}
        self.ended: list[str] = []

    def new(self, node: str) -> str:
        return f"{node}{next(self.counters.setdefault(node, itertools.count(1)))}"

    def end(self, workers: list[str]) -> None:
        self.ended += workers


def pool(**nodes: int) -> tuple[Lending[str], Workers]:
    workers = Workers()
    lending = Lending(workers.new, workers.end)
    for node, count in nodes.items():
        lending.start(node, count)
    return lending, workers


def serve(lending: Lending[str], gpus: dict[str, str]) -> None:
    """Lend each named worker once for its GPU and give it back, so that it serves that GPU."""
    for worker, gpu in gpus.items():
        lending.gpu[worker] = gpu


def test_a_rank_on_gpu_g_gets_the_idle_worker_that_serves_g():
    lending, made = pool(A=2)
    serve(lending, {"A1": "1", "A2": "0"})
    _, (worker,) = lending.lend([("A", "0")], None)
    assert worker == "A2" and made.ended == []


def test_else_a_worker_that_serves_no_gpu_yet_and_it_serves_g_from_then_on():
    lending, made = pool(A=2)
    serve(lending, {"A1": "1"})
    lease, (worker,) = lending.lend([("A", "0")], None)
    assert worker == "A2" and lending.gpu["A2"] == "0" and made.ended == []
    lending.give_back(lease, False, [worker])
    _, (again,) = lending.lend([("A", "0")], None)
    assert again == "A2"


def test_else_a_new_worker_replaces_an_idle_worker_of_another_gpu():
    lending, made = pool(A=1)
    serve(lending, {"A1": "1"})
    lease, (worker,) = lending.lend([("A", "0")], None)
    assert worker == "A2" and made.ended == ["A1"]  # never A1: it holds GPU 1's CUDA context
    assert lending.have("A") == 1  # the node keeps the workers it hosts


def test_cpu_ranks_take_any_idle_worker_in_order():
    lending, made = pool(A=2)
    _, workers = lending.lend([("A", None), ("A", None)], None)
    assert workers == ["A1", "A2"] and made.ended == []


def test_a_multi_node_trial_gets_workers_on_each_rank_node_and_gives_each_back_to_its_node():
    lending, made = pool(A=2, B=2)
    ranks = [("A", "0"), ("A", "1"), ("B", "0"), ("B", "1")]
    lease, workers = lending.lend(ranks, "pg")
    assert workers == ["A1", "A2", "B1", "B2"] and lending.idle == {"A": [], "B": []}
    assert lending.have("A") == 2 and lending.have("B") == 2
    lending.give_back(lease, False, workers)
    assert lending.idle == {"A": ["A1", "A2"], "B": ["B1", "B2"]}
    _, again = lending.lend(ranks, "pg2")  # the same ranks on the same processes, GPU by GPU
    assert again == workers and made.ended == []


def test_a_broken_lease_ends_its_workers_on_every_node():
    lending, made = pool(A=1, B=1)
    lease, workers = lending.lend([("A", None), ("B", None)], "pg")
    lending.give_back(lease, True, workers)
    assert sorted(made.ended) == ["A1", "B1"] and lending.idle == {"A": [], "B": []}


def test_a_node_never_keeps_more_workers_than_it_hosts():
    lending, made = pool(A=1)
    first, (a1,) = lending.lend([("A", None)], None)
    second, (a2,) = lending.lend([("A", None)], None)  # no idle one: a new worker, made at once
    lending.give_back(first, False, [a1])
    lending.give_back(second, False, [a2])
    assert lending.idle["A"] == ["A2"] and made.ended == ["A1"]  # the one back first found the node full


def test_a_lease_the_pool_does_not_know_ends_its_workers():
    lending, made = pool(A=1)
    lending.give_back(41, False, ["Z9"])  # lent before the pool restarted
    assert made.ended == ["Z9"] and lending.idle["A"] == ["A1"]


def test_workers_of_a_trial_whose_placement_group_is_gone_are_ended():
    lending, made = pool(A=2)
    lending.lend([("A", None)], "gone")
    lending.lend([("A", None)], "alive")
    lending.end_abandoned(["gone"])
    assert made.ended == ["A1"] and [group for group, _ in lending.lent.values()] == ["alive"]


def test_the_sweeps_end_ends_every_worker_idle_and_lent_on_every_node():
    lending, made = pool(A=2, B=1)
    lending.lend([("A", "0"), ("B", None)], "running")
    assert sorted(lending.end_all()) == ["A1", "A2", "B1"] and sorted(made.ended) == ["A1", "A2", "B1"]
    assert lending.have("A") == lending.have("B") == 0 and not lending.gpu


def test_workers_that_died_while_idle_are_never_lent():
    lending, made = pool(A=2)
    serve(lending, {"A1": "0"})
    lending.drop_dead("A", ["A2"])
    assert lending.idle["A"] == ["A2"] and "A1" not in lending.gpu


# --- threads: what each lent CPU worker computes with (``cpu_threads.py``) ----------------------

LONE = ThreadShare(own=1, node_cpus=4)


def told(changed: dict[str, ThreadCount]) -> dict[str, int]:
    return {worker: count.count for worker, count in changed.items()}


def test_a_lone_trial_shares_its_nodes_cpus_and_shrinks_the_moment_another_is_lent_beside_it():
    lending, _ = pool(A=4)
    first, _ = lending.lend([("A", None)], "g1", LONE)
    assert told(lending.share_threads(["A"])) == {"A1": 4}  # alone: every core, as a lone torchrun
    second, _ = lending.lend([("A", None), ("A", None)], "g2", LONE)
    assert told(lending.share_threads(["A"])) == {"A1": 1, "A2": 1, "A3": 1}  # the first is told at once
    lending.give_back(first, False, ["A1"])
    assert told(lending.share_threads(["A"])) == {"A2": 2, "A3": 2}  # alone again: 4 CPUs over 2 ranks
    assert told(lending.share_threads(["A"])) == {}  # nothing changed: nothing told


def test_the_pools_words_are_ordered_so_a_late_one_cannot_undo_a_newer_one():
    lending, _ = pool(A=2)
    lending.lend([("A", None)], "g1", LONE)
    alone = lending.share_threads(["A"])["A1"]
    lending.lend([("A", None)], "g2", LONE)
    beside = lending.share_threads(["A"])["A1"]
    assert beside.seq > alone.seq
    threads = RankThreads()
    threads.set(beside)
    threads.set(alone)  # the lend's count, reaching the worker after the later word
    assert threads.wanted == 1


def test_trials_across_nodes_and_gpu_trials_never_take_more_than_their_own_share():
    lending, _ = pool(A=2, B=2)
    lending.lend([("A", None), ("B", None)], "g1", ThreadShare(own=1))  # a trial across nodes
    assert told(lending.share_threads(["A", "B"])) == {"A1": 1, "B1": 1}
    lending.lend([("B", "0")], "g2", None)  # a GPU trial: no CPU threads to tell it
    assert told(lending.share_threads(["B"])) == {}


@pytest.mark.parametrize(
    ("leases", "threads"),
    [
        ([(ThreadShare(1, 2), 1)], [2]),  # a lone 1-worker trial on 2 CPUs: both
        ([(ThreadShare(1, 2), 2)], [1]),  # a lone 2-worker trial: one each
        ([(ThreadShare(2, 2), 2)], [2]),  # never below its own cpus_per_worker
        ([(ThreadShare(1, 8), 3)], [2]),  # 8 CPUs over 3 ranks, rounded down
        ([(ThreadShare(1), 1)], [1]),  # across nodes: its own
        ([(ThreadShare(1, 4), 1), (ThreadShare(1, 4), 1)], [1, 1]),  # two trials: each its own
        ([(None, 1)], [None]),  # a GPU trial
    ],
)
def test_threads_on_a_node(leases, threads):
    assert threads_on_node(leases) == threads


def test_a_rank_shrinks_at_any_step_and_grows_only_at_a_report():
    import torch

    before = torch.get_num_threads()
    threads = RankThreads()
    try:
        threads.begin(ThreadCount(2, 1))
        assert torch.get_num_threads() == 2
        threads.set(ThreadCount(1, 2))
        threads.on_optimizer_step(None, (), {})  # the next step takes a smaller count
        assert torch.get_num_threads() == 1
        threads.set(ThreadCount(2, 3))
        threads.on_optimizer_step(None, (), {})  # not a larger one: a trial may start beside it soon
        assert torch.get_num_threads() == 1
        threads.apply(grow=True)  # the rank's next report does
        assert torch.get_num_threads() == 2
        threads.end()
        threads.set(ThreadCount(1, 4))  # between trials nothing is applied
        threads.on_optimizer_step(None, (), {})
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
