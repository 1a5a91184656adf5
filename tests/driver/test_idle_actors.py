"""With start-ahead, the admission lets Tune keep idle trial actors (``Admission._keep_actors``),
checked with Tune's own actor cache and no Ray: as many of a node's token shape as the node hosts
workers, fewer when a node is lost, and none past the sweep's end; and the search is not over to
Tune while the admission holds trials back (else Tune keeps no actor for them)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from ray import tune
from ray.tune.utils.object_cache import _ObjectCache

from raysweep.driver.admission import Admission, Board
from raysweep.placement import Capacity, Node, token_bundles


def _token(address: str) -> tune.PlacementGroupFactory:
    return tune.PlacementGroupFactory(token_bundles(address))


def _kept(cache: _ObjectCache, address: str, offered: int) -> int:
    """How many of ``offered`` idle actors of the node's shape Tune's cache takes."""
    return sum(cache.cache_object(_token(address), f"{address}-{i}") for i in range(offered))


def test_tune_keeps_as_many_idle_actors_per_node_as_the_node_hosts_workers_and_drops_a_lost_nodes():
    cache = _ObjectCache(may_keep_one=True)  # as Tune's TuneController makes it
    controller = SimpleNamespace(_tune_controller=SimpleNamespace(_actor_cache=cache))
    a, b = Node("a", "10.0.0.1", 2, 2.0), Node("b", "10.0.0.2", 4, 4.0)
    capacity = Capacity((a, b), use_gpu=False, cpus_per_worker=1.0, managed_slots=True)
    admission = Admission(None, capacity, None, holdings=None, board=Board(), queue=4, ahead=frozenset({1, 2}))
    admission._keep_actors(controller)
    assert (_kept(cache, a.address, 3), _kept(cache, b.address, 5)) == (2, 4)
    assert not list(cache.flush_cached_objects())  # a step's cleanup keeps them
    admission._live = replace(capacity, nodes=(a,))  # node b is lost
    admission._keep_actors(controller)
    assert sorted(cache.flush_cached_objects()) == [f"{b.address}-{i}" for i in range(4)]
    admission._keep_actors(controller)  # nothing changed: nothing more is let go
    assert not list(cache.flush_cached_objects())
    assert len(list(cache.flush_cached_objects(force_all=True))) == 2  # the sweep's end


def test_the_search_is_not_over_to_tune_while_the_admission_holds_trials_back():
    """Tune keeps an ended trial's actor for the next trial only while the search goes on or a
    trial is staged (``TuneController._maybe_cache_trial_actor``), and the admission stages one at
    a time: once the last trial was made, each later one waited for a new actor. So the search
    ends for Tune only when no trial waits; the admission counts them at each of Tune's steps."""
    from raysweep.driver.admitted_search import AdmittedSearch

    made_all = SimpleNamespace(is_finished=lambda: True, next_trial=lambda: None)
    capacity = Capacity((Node("a", "10.0.0.1", 2, 2.0),), use_gpu=False, cpus_per_worker=1.0, managed_slots=True)
    admission = Admission(None, capacity, None, holdings=None, board=Board(), queue=4)
    search = AdmittedSearch(made_all, admission=admission)
    admission.waiting = 2  # held back, PAUSED (``Admission.choose``)
    assert not search.is_finished() and search.next_trial() is None
    admission.waiting = 0  # the last one has started
    assert search.is_finished()
    assert AdmittedSearch(made_all).is_finished()  # no admission: the inner search's word


def test_a_search_tune_ended_is_over_though_the_admission_counted_trials_waiting():
    """A stopper ends the sweep while the admission holds trials back: Tune stops them all and
    calls ``set_finished``, and asks the admission nothing more, so its count of waiting trials
    stays. The search must be over for Tune then; Tune waited for a next trial forever."""
    from raysweep.driver.admitted_search import AdmittedSearch

    ended: list[bool] = []
    more = SimpleNamespace(
        is_finished=lambda: bool(ended), next_trial=lambda: None, set_finished=lambda: ended.append(True)
    )
    capacity = Capacity((Node("a", "10.0.0.1", 2, 2.0),), use_gpu=False, cpus_per_worker=1.0, managed_slots=True)
    admission = Admission(None, capacity, None, holdings=None, board=Board(), queue=4)
    search = AdmittedSearch(more, admission=admission)
    admission.waiting = 5  # held back when the stop came; no later step recounts them
    assert not search.is_finished()
    search.set_finished()
    assert search.is_finished() and search.next_trial() is None and ended == [True]
