"""raysweep.ddp: DDP on CPU with 2 gloo processes checked against one process, plus the helpers.

The multi-process tests follow huggingface accelerate's ``test_grad_sync``: two workers each
take their shard, and the result must equal one process trained on the union of the shards.
"""

from __future__ import annotations

import contextlib
import os
import random
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import TensorDataset

import raysweep
from raysweep import ddp

WORLD = 2
N_SAMPLES = 16
BATCH = 2


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    return TensorDataset(
        torch.randn(N_SAMPLES, 4, generator=g), torch.randn(N_SAMPLES, 1, generator=g), torch.arange(N_SAMPLES)
    )


def _model() -> nn.Module:
    torch.manual_seed(1234)  # the same initial weights in every process
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def _worker(rank: int, init_file: str, out_dir: str, grad_accum: int) -> None:
    """One gloo worker: an epoch's index shard, then one optimizer step of ``grad_accum`` micro-batches."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        ctx = ddp.setup(seed=100)
        torch_seed = torch.initial_seed()
        model = ddp.prepare_model(_model(), ctx)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = ddp.make_loader(_data(), BATCH, shuffle=True, seed=3)
        ddp.set_epoch(loader, 5)
        epoch_indices = torch.cat([idx for _, _, idx in loader]).tolist()

        step_indices, local_grads = [], []
        for micro, (x, y, idx) in enumerate(loader):
            with ddp.sync_grads(model, micro, grad_accum):
                (nn.functional.mse_loss(model(x), y) / grad_accum).backward()
            step_indices += idx.tolist()
            local_grads.append(ddp.unwrap(model)[0].weight.grad.clone())
            if micro + 1 == grad_accum:
                break
        opt.step()
        result = {
            "rank": ctx.rank,
            "world_size": ctx.world_size,
            "torch_seed": torch_seed,
            "epoch_indices": epoch_indices,
            "n_batches": len(loader),
            "step_indices": step_indices,
            "grads": local_grads,
            "params": [p.detach().clone() for p in ddp.unwrap(model).parameters()],
            "throughput": ddp.throughput(10 * (rank + 1), 1.0 + rank),
        }
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()  # both ranks have saved: neither needs the other any more
    except BaseException:
        dist.destroy_process_group()
        raise
    # Exit without tearing the group down: gloo's pair threads, destroyed while the peer closes
    # its end, can abort a rank ("terminate called without an active exception"; once in CI's
    # suite, after the barrier). The kernel closes the sockets; the results are on disk.
    os._exit(0)


def _run_workers(tmp_path, grad_accum: int) -> list[dict]:
    mp.spawn(_worker, args=(str(tmp_path / "pg_init"), str(tmp_path), grad_accum), nprocs=WORLD, join=True)
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]


def _reference_params(indices: list[int]) -> list[torch.Tensor]:
    """One process, one SGD step on the mean loss over all ``indices``."""
    x, y, _ = _data()[indices]
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    return [p.detach() for p in model.parameters()]


@pytest.fixture(scope="module")
def one_step(tmp_path_factory) -> list[dict]:
    return _run_workers(tmp_path_factory.mktemp("ddp_step"), grad_accum=1)


@pytest.fixture(scope="module")
def accumulated(tmp_path_factory) -> list[dict]:
    return _run_workers(tmp_path_factory.mktemp("ddp_accum"), grad_accum=2)


def test_ranks_come_from_the_process_group_and_seeds_differ(one_step):
    assert [r["rank"] for r in one_step] == [0, 1]
    assert all(r["world_size"] == WORLD for r in one_step)
    assert [r["torch_seed"] for r in one_step] == [100, 101]  # base seed + rank


def test_every_sample_is_seen_exactly_once_per_epoch(one_step):
    shards = [r["epoch_indices"] for r in one_step]
    assert sorted(shards[0] + shards[1]) == list(range(N_SAMPLES))
    assert not set(shards[0]) & set(shards[1])
    assert all(r["n_batches"] == N_SAMPLES // (WORLD * BATCH) for r in one_step)  # steps shrink to 1/N


def test_step_equals_one_process_on_the_union_of_shards(one_step):
    union = one_step[0]["step_indices"] + one_step[1]["step_indices"]
    assert len(set(union)) == WORLD * BATCH
    expected = _reference_params(union)
    for r in one_step:
        for got, want in zip(r["params"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_grad_accumulation_equals_one_large_batch(accumulated):
    union = accumulated[0]["step_indices"] + accumulated[1]["step_indices"]
    assert len(set(union)) == WORLD * BATCH * 2
    expected = _reference_params(union)
    for r in accumulated:
        for got, want in zip(r["params"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_accumulation_steps_are_not_all_reduced(accumulated):
    # After the first micro-batch each rank holds only its own gradient (no_sync) ...
    assert not torch.allclose(accumulated[0]["grads"][0], accumulated[1]["grads"][0])
    # ... after the last one the gradients are averaged: identical on every rank.
    torch.testing.assert_close(accumulated[0]["grads"][1], accumulated[1]["grads"][1])


def test_throughput_is_the_whole_group_over_the_slowest_worker(one_step):
    assert [r["throughput"] for r in one_step] == [pytest.approx(30 / 2.0)] * WORLD


# --- single-process helpers ------------------------------------------------------------------


def test_single_process_loader_sees_every_sample_once_and_reshuffles_per_epoch():
    loader = ddp.make_loader(_data(), 3, shuffle=True, seed=0)
    orders = []
    for epoch in (0, 1, 1):
        ddp.set_epoch(loader, epoch)
        orders.append(torch.cat([idx for _, _, idx in loader]).tolist())
    assert sorted(orders[0]) == list(range(N_SAMPLES))
    assert len(loader) == -(-N_SAMPLES // 3)  # the short last batch is kept
    assert orders[0] != orders[1] and orders[1] == orders[2]


@pytest.mark.parametrize(
    ("lr", "effective", "base", "expected"),
    [(1e-3, 256, 64, 4e-3), (1e-3, 32, 64, 5e-4), (1e-3, 256, None, 1e-3), (0.1, 8, 8, 0.1)],
)
def test_scaled_lr_is_the_linear_rule(lr, effective, base, expected):
    assert ddp.scaled_lr(lr, effective, base) == pytest.approx(expected)


def test_scaled_lr_rejects_a_non_positive_base():
    with pytest.raises(ValueError, match="base_batch must be > 0, got 0"):
        ddp.scaled_lr(1e-3, 64, 0)


def test_effective_batch_is_printed_once(capsys):
    assert ddp.effective_batch(16, 4, 2, verbose=True) == 128
    assert capsys.readouterr().out.count("effective batch 128") == 1


def test_warmup_is_linear_then_constant():
    lrs = [ddp.lr_at(s, 1.0, warmup_steps=4) for s in range(6)]
    assert lrs == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0])


def test_cosine_decay_after_warmup_ends_at_min_ratio():
    lrs = [ddp.lr_at(s, 2.0, warmup_steps=2, total_steps=12, min_ratio=0.1) for s in range(13)]
    assert lrs[1] == pytest.approx(2.0)
    assert all(a >= b for a, b in zip(lrs[1:], lrs[2:], strict=False))
    assert lrs[12] == pytest.approx(0.2)
    assert ddp.lr_at(100, 2.0, 2, 12) == pytest.approx(0.2)  # clamped past the end


def test_autocast_keeps_fp32_on_cpu_unless_asked():
    a = torch.randn(2, 2)
    with ddp.autocast(torch.device("cpu")):
        assert (a @ a).dtype == torch.float32
    with ddp.autocast(torch.device("cpu"), cpu_bf16=True):
        assert (a @ a).dtype == torch.bfloat16


def test_sync_grads_is_a_no_op_without_ddp():
    model = nn.Linear(1, 1)
    context = ddp.sync_grads(model, micro_step=0, grad_accum=4)
    assert isinstance(context, contextlib.nullcontext)  # a plain module has no no_sync()
    with context:
        model(torch.ones(1, 1)).sum().backward()
    assert model.weight.grad is not None and model.weight.grad.item() == 1.0  # gradients accumulate as usual


def test_each_optimizer_step_averages_its_own_micro_batches_the_short_last_one_too():
    """5 micro-batches with grad_accum 2: steps after 2, 4 and 5. The last step's gradient is its
    one batch's, as with grad_accum 1; dividing it by 2 (every loop did) halved that step."""
    torch.manual_seed(0)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(5)]
    model = nn.Linear(3, 1)
    plan, step_grads = [], []
    for (x, y), loss_scale, step in ddp.accumulate(batches, model, grad_accum=2):
        (nn.functional.mse_loss(model(x), y) * loss_scale).backward()
        plan.append((loss_scale, step))
        if step:
            step_grads.append(model.weight.grad.clone())
            model.zero_grad()
    assert plan == [(0.5, False), (0.5, True), (0.5, False), (0.5, True), (1.0, True)]

    def mean_grad(group: list) -> torch.Tensor:
        model.zero_grad()
        nn.functional.mse_loss(model(torch.cat([x for x, _ in group])), torch.cat([y for _, y in group])).backward()
        return model.weight.grad.clone()

    for got, group in zip(step_grads, (batches[0:2], batches[2:4], batches[4:5]), strict=True):
        assert torch.allclose(got, mean_grad(group), atol=1e-6)


@dataclass
class _Inner:
    repeat: int = 1  # a leaf
    flag: bool = True


@dataclass
class _Cfg:
    lr: float = 0.1
    inner: _Inner = field(default_factory=_Inner)
    items: list[_Inner] = field(default_factory=lambda: [_Inner(1), _Inner(2)])


def test_config_from_dict_fills_nested_dataclasses_from_their_defaults():
    cfg = ddp.config_from_dict(_Cfg, {"lr": 0.5, "inner": {"flag": False}, "items": [{"repeat": 3}, {}]})
    assert cfg == _Cfg(lr=0.5, inner=_Inner(1, False), items=[_Inner(3, True), _Inner(2, True)])


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"lrr": 1}, r"unknown config key 'lrr' \(did you mean lr\?\)"),
        ({"inner": {"repeats": 2}}, r"'inner.repeats' \(did you mean inner.repeat\?\)"),
        ({"items": [{"flg": 1}]}, r"'items.0.flg' \(did you mean items.0.flag\?\)"),
        ({"inner": {"num_gpus": 2}}, r"'inner.num_gpus'"),
    ],
)
def test_config_from_dict_names_unknown_keys(config, message):
    with pytest.raises(ValueError, match=message):
        ddp.config_from_dict(_Cfg, config)


def test_config_from_dict_reports_every_unknown_key_at_once():
    with pytest.raises(ValueError, match="'a'.*'b'"):
        ddp.config_from_dict(_Cfg, {"a": 1, "b": 2})


def _checkpointing_loop(config: dict) -> None:
    """Trains a few SGD-with-momentum steps per epoch; records what resume must restore."""
    ddp.setup(seed=5)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    start, extra = ddp.load_checkpoint(model, opt, seed=5)
    config["seen"].append(
        {
            "start": start,
            "extra": extra,
            "weight": model.weight.detach().clone(),
            "momentum": [s["momentum_buffer"].clone() for s in opt.state.values()],
        }
    )
    for epoch in range(start + 1, config["epochs"] + 1):
        x = torch.randn(8, 3)
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        config["saved"].append(
            {
                "weight": model.weight.detach().clone(),
                "momentum": [s["momentum_buffer"].clone() for s in opt.state.values()],
                "draws": (torch.rand(1).item(), np.random.rand(), random.random()),
            }
        )
        # The draws above moved the RNGs; the checkpoint holds the state after them.
        ddp.report_epoch(
            {"epoch": epoch},
            model=model,
            optimizer=opt,
            epoch=epoch,
            extra={"tag": epoch},
            checkpoint_every=config["every"],
            last_epoch=config["epochs"],
        )


def test_resume_restores_model_optimizer_epoch_and_rng():
    first = {"epochs": 4, "every": 2, "seen": [], "saved": []}
    raysweep.run_local(_checkpointing_loop, first)
    # a run cut after epoch 2: its checkpoint is the epoch-2 one
    cut = {"epochs": 2, "every": 2, "seen": [], "saved": []}
    raysweep.run_local(_checkpointing_loop, cut)
    resumed = {"epochs": 4, "every": 2, "seen": [], "saved": []}
    reports = raysweep.run_local(_checkpointing_loop, resumed, resume=True)

    start = resumed["seen"][0]
    assert start["start"] == 2 and start["extra"] == {"tag": 2}
    assert [r["epoch"] for r in reports] == [3, 4]
    torch.testing.assert_close(start["weight"], cut["saved"][-1]["weight"])
    torch.testing.assert_close(start["momentum"], cut["saved"][-1]["momentum"])
    # Same RNG streams after resume as in the uninterrupted run: epochs 3-4 are bit-identical.
    torch.testing.assert_close(resumed["saved"][-1]["weight"], first["saved"][-1]["weight"], rtol=0, atol=0)
    assert resumed["saved"][-1]["draws"] == first["saved"][-1]["draws"]


def test_checkpoint_every_n_epochs_and_at_the_last():
    seen: list = []
    original = raysweep.trial.report

    def spy(metrics, checkpoint=None):
        seen.append((metrics["epoch"], checkpoint is not None))
        original(metrics, checkpoint)

    raysweep.trial.report = spy
    try:
        raysweep.run_local(_checkpointing_loop, {"epochs": 5, "every": 2, "seen": [], "saved": []})
    finally:
        raysweep.trial.report = original
    assert seen == [(1, False), (2, True), (3, False), (4, True), (5, True)]


def test_a_fresh_run_starts_at_epoch_zero():
    config = {"epochs": 1, "every": 1, "seen": [], "saved": []}
    raysweep.run_local(_checkpointing_loop, config)
    assert config["seen"][0]["start"] == 0
