"""Admission, fed by hand with no cluster (``placement.py``): where a trial's ranks go (one node,
or whole nodes with equal ranks), the bundles it holds, the sentence for a size that never fits
(naming the resource that bounds a node), concurrency limits, and each rank's place and GPU."""

from __future__ import annotations

import pytest

from raysweep.placement import (
    GIB,
    SLOT,
    Capacity,
    NeverPlaced,
    Node,
    Shape,
    concurrency_limit,
    fitting_sizes,
    rank_gpus,
    rank_places,
    shape,
    slots_for,
    trial_bundles,
    warm_workers,
    workers_on,
)


def cpu(*slots: int, managed: bool = True, cpus: float | None = None) -> Capacity:
    """Nodes of ``slots`` CPU workers each (and as many CPUs, or ``cpus``)."""
    nodes = tuple(Node(f"n{i}", f"10.0.0.{i}", s, float(s if cpus is None else cpus)) for i, s in enumerate(slots))
    return Capacity(nodes, use_gpu=False, cpus_per_worker=1.0, managed_slots=managed)


def gpu(*gpus: int, cpus: float = 64, **kw) -> Capacity:
    nodes = tuple(Node(f"g{i}", f"10.0.1.{i}", g, cpus, float(g), 512 * GIB) for i, g in enumerate(gpus))
    return Capacity(nodes, use_gpu=True, cpus_per_worker=kw.pop("cpus_per_worker", 1.0), managed_slots=True, **kw)


def test_a_trial_of_one_node_or_less_stays_on_one_node():
    assert shape(2, cpu(2, 4)) == Shape(1, 2)
    assert shape(4, cpu(2, 4)) == Shape(1, 4)
    assert shape(8, gpu(8, 8)) == Shape(1, 8)


def test_a_larger_trial_takes_whole_nodes_with_equal_ranks():
    assert shape(16, gpu(8, 8, 8)) == Shape(2, 8)
    assert shape(24, gpu(8, 8, 8)) == Shape(3, 8)
    assert shape(4, cpu(2, 2)) == Shape(2, 2)
    with pytest.raises(NeverPlaced, match=r"num_gpus=12 .* whole nodes of 8 ranks each: 12 is no multiple of 8"):
        shape(12, gpu(8, 8))
    with pytest.raises(NeverPlaced, match=r"needs 3 whole nodes of 8: the cluster has 2. Sizes that fit: 1-8, 16$"):
        shape(24, gpu(8, 8, 4))


def test_never_placed_names_the_resource_that_bounds_a_node():
    """Issue 44: 4 fake GPUs on a 2-CPU node host 2 workers, not 4: a 4-worker trial never fits,
    and the sentence says it is the CPUs (it waited forever before)."""
    small = gpu(4, cpus=2)
    assert small.largest_node == 2 and small.slots_per_node == (4,)
    assert small.describe().endswith("(a node of 4 slots hosts 2: 2 CPU(s), cpus_per_worker 1)")
    with pytest.raises(NeverPlaced, match=r"num_gpus=4 can never be placed: .* \(2 CPU\(s\), cpus_per_worker 1\)"):
        shape(4, small)
    assert trial_bundles(4, small) == ([{"memory": 1}], "STRICT_PACK")  # a token: it starts and explains
    memory = gpu(8, memory_per_worker=100 * GIB)  # 512 GiB hosts 5 workers of 100
    with pytest.raises(NeverPlaced, match=r"hosts 5 worker\(s\) \(512.0 GiB of memory, memory_per_worker_gb 100\)"):
        shape(8, memory)
    assert fitting_sizes(gpu(8, 8, 4)) == "1-8, 16" and fitting_sizes(cpu(1)) == "1"


def test_a_cluster_that_can_grow_gives_every_size_a_shape_to_wait_for():
    grows = Capacity(gpu(8).nodes, True, 1.0, True, grows="its autoscaler may add nodes")
    assert shape(16, grows) == Shape(2, 8)  # more nodes of 8 may come
    assert shape(12, grows) == Shape(1, 12)  # a larger node may come


def test_bundles_hold_each_nodes_share_and_spread_over_nodes():
    assert trial_bundles(2, cpu(2, 4)) == ([{"CPU": 2.0, SLOT: 2}], "STRICT_PACK")
    # TorchTrainer: its own actors ask for the CPUs; the trial holds the slots
    assert trial_bundles(2, cpu(2, 4), holds_workers=False) == ([{SLOT: 2}], "STRICT_PACK")
    assert trial_bundles(2, cpu(2, managed=False)) == ([{"CPU": 2.0}], "STRICT_PACK")
    assert trial_bundles(16, gpu(8, 8)) == ([{"CPU": 8.0, "GPU": 8.0, SLOT: 8.0}] * 2, "STRICT_SPREAD")
    assert trial_bundles(4, cpu(2, 2), holds_workers=False) == ([{SLOT: 2}] * 2, "STRICT_SPREAD")
    memory = gpu(4, memory_per_worker=2 * GIB)
    assert trial_bundles(2, memory) == ([{"CPU": 2.0, "GPU": 2.0, "memory": 4.0 * GIB, SLOT: 2.0}], "STRICT_PACK")


def test_gpu_bundles_hold_gpus_and_a_packed_trial_holds_its_share_of_a_slot():
    assert trial_bundles(2, gpu(4, cpus_per_worker=2.0))[0] == [{"CPU": 4.0, "GPU": 2.0, SLOT: 2.0}]
    packed = Capacity((Node("g", "a", 16, 8.0, 4.0),), True, 0.5, True, gpus_per_worker=0.25)
    assert trial_bundles(1, packed)[0] == [{"CPU": 0.5, "GPU": 0.25, SLOT: 0.25}]
    assert workers_on(0.75, 0.25) == 3 and workers_on(4, 0.1) == 40  # float sums keep whole workers
    assert slots_for({"CPU": 7, "GPU": 2}, use_gpu=False, cpus_per_worker=2) == 3
    assert slots_for({"CPU": 7, "GPU": 2}, use_gpu=True, cpus_per_worker=2, gpus_per_worker=0.5) == 4


def test_concurrency_limit_only_caps_clusters_without_slots():
    assert concurrency_limit(cpu(2, 2), 2, None) is None  # slots do the admission
    assert concurrency_limit(cpu(2, 2), 2, 3) == 3
    assert concurrency_limit(cpu(2, 3, managed=False), 2, None) == 2  # one 2-worker trial per node
    assert concurrency_limit(cpu(2, 3, managed=False), 2, 1) == 1
    assert concurrency_limit(cpu(1, managed=False), 2, None) == 1  # never 0: the trial explains itself


def test_warm_workers_start_only_what_the_sweeps_trials_use_at_once():
    two_of_four = cpu(4, 4)
    assert warm_workers(two_of_four, {1}, 1) == {"n0": (1, 4), "n1": (1, 4)}  # one 1-worker trial
    assert warm_workers(two_of_four, {1, 2}, 3) == {"n0": (4, 4), "n1": (4, 4)}  # 3 trials of 2: capped at 4
    assert warm_workers(two_of_four, {8}, 1) == {"n0": (4, 4), "n1": (4, 4)}  # whole nodes of 4
    assert warm_workers(two_of_four, {2}, 100) == {"n0": (4, 4), "n1": (4, 4)}  # many trials: every slot
    assert warm_workers(two_of_four, {16}, 1) == {"n0": (0, 4), "n1": (0, 4)}  # never placed: none to start


def test_each_rank_gets_its_gpu_in_ray_order_and_packed_ranks_share_one():
    assert rank_gpus(["3", "1"], 2) == ["1", "3"]
    assert rank_gpus(["10", "2"], 2) == ["2", "10"]  # numeric order, not string order
    assert rank_gpus(["0", "1", "2", "3"], 2) == ["0", "2"]  # gpus_per_worker 2: the first of each share
    assert rank_gpus(["5"], 1) == ["5"] and rank_gpus([], 2) == []


def test_rank_places_number_ranks_node_by_node_with_local_ranks_from_zero():
    places = rank_places([("A", "10.0.0.2", ["1", "0"]), ("B", "10.0.0.2", ["3", "2"])], 2)
    assert [(p.node_id, p.node_rank, p.local_rank, p.local_world_size) for p in places] == [
        ("A", 0, 0, 2),
        ("A", 0, 1, 2),
        ("B", 1, 0, 2),
        ("B", 1, 1, 2),
    ]  # both nodes share an address: the local ranks come from the node id
    assert [p.gpu for p in places] == ["0", "1", "2", "3"] and places[3].node_gpus == ("2", "3")
    assert [p.gpu for p in rank_places([("A", "a", [])], 2)] == [None, None]
