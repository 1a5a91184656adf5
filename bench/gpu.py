"""``python -m bench --gpu``: issue 21's figures on one real GPU, into ``bench/results/gpu.json``.

1. overhead: trivial 1-GPU trials one at a time, raysweep (a) against a torchrun agent (c).
2. busy: 16 looped-transformer trials of one GPU each; the GPU's busy fraction over the sweep's
   wall time (NVML's utilization.gpu, sampled by ``nvidia-smi`` every 200 ms). Goal >= 0.9. Also
   the CUDA contexts each GPU holds (processes in ``nvidia-smi --query-compute-apps``): the most
   at once and the last sample before the sweep ended.
3. vs_torchrun: the loop's samples/s under raysweep and under torchrun on the same GPU, in
   interleaved pairs. Goal >= 0.97x.
4. packing: 16 small 1-worker trials packed four to the GPU (``resources.gpus_per_worker: 0.25``)
   against one per GPU: the sweeps' wall times and their ratio.

One GPU: NCCL across 2+ GPUs is not run here (the 2-rank path runs on CPU with gloo in the
tests, and GPU placement is tested with the GPUs Ray can advertise).

    flock /tmp/raysweep-ray.lock .venv/bin/python -m bench.gpu [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from typing import Any

from bench import ddp_scaling, overhead, systems
from bench.common import write_result

SIZES = {  # a transformer trial: (train_size, val_size, epochs), and trials per overhead run / pair count
    "full": {"trial": (20000, 1000, 3), "overhead_trials": 8, "pairs": 3, "sweep_trials": 16},
    "quick": {"trial": (1000, 100, 1), "overhead_trials": 2, "pairs": 1, "sweep_trials": 4},
}


class GpuBusy:
    """The GPU's utilization.gpu (percent of time a kernel ran), sampled by nvidia-smi."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200", "-i", "0"],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:
            if line.strip().isdigit():
                self.samples.append((time.time(), float(line) / 100))

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(10)

    def fraction(self, start: float, end: float) -> float | None:
        inside = [v for t, v in self.samples if start <= t <= end]
        return round(sum(inside) / len(inside), 3) if inside else None


class GpuContexts:
    """The processes holding a CUDA context on each GPU (``nvidia-smi --query-compute-apps``),
    sampled every second: the most at once, and the last sample before the sweep ended."""

    def __init__(self) -> None:
        self.most: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
                capture_output=True,
                text=True,
            )
            pids: dict[str, set[str]] = {}
            for line in out.stdout.splitlines():
                gpu, _, pid = (part.strip() for part in line.partition(","))
                pids.setdefault(gpu, set()).add(pid)
            if pids:
                self.last = {gpu: len(p) for gpu, p in pids.items()}
                self.most = {gpu: max(self.most.get(gpu, 0), n) for gpu, n in self.last.items()}

    def close(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(10)
        return {"most_per_gpu": self.most, "last_per_gpu": self.last}


def transformer_spec(name: str, trials: int, size: tuple[int, int, int], **extra: Any) -> dict[str, Any]:
    train_size, val_size, epochs = size
    return {
        "name": name,
        "method": "grid",
        "metric": {"name": "exact_accuracy", "goal": "maximize"},
        "train_loop": "bench.loops:transformer",
        "parameters": {"seed": {"values": list(range(trials))}, "num_gpus": {"value": 1}},
        "base_config": {"epochs": epochs, "train_size": train_size, "val_size": val_size, "checkpoint_every": 0},
        **extra,
    }


def wall(r: dict[str, Any]) -> tuple[float, float]:
    return min(s for s, _ in r["spans"]), max(e for _, e in r["spans"])


def busy(size: dict[str, Any]) -> dict[str, Any]:
    sampler, contexts = GpuBusy(), GpuContexts()
    try:
        r = systems.run_raysweep(transformer_spec("bench-gpu-busy", size["sweep_trials"], size["trial"]), "transformer")
    finally:
        sampler.close()
        held = contexts.close()
    start, end = wall(r)
    return {
        "wall_s": round(end - start, 1),
        "gpu_busy_fraction": sampler.fraction(start, end),
        "trials_done": len(r["spans"]),
        "failed": r["failed"],
        "cuda_contexts": held,
    }


def vs_torchrun(size: dict[str, Any]) -> dict[str, Any]:
    pairs = []
    for i, runs in enumerate(
        ddp_scaling.interleaved_pairs(transformer_spec("bench-gpu-ddp", 1, size["trial"]), size["pairs"])
    ):
        pair = {key: x["by_workers"].get(1) for key, x in runs.items()}
        pair["a_over_c"] = ddp_scaling.ratio(pair["a_raysweep"], pair["c_torchrun"])
        print(f"gpu pair {i}: {pair}", flush=True)
        pairs.append(pair)
    return {"pairs": pairs, "a_over_c": ddp_scaling.median_of_pairs((p["a_over_c"] for p in pairs), 3)}


def packing(size: dict[str, Any]) -> dict[str, Any]:
    small = (size["trial"][0] // 10, size["trial"][1], size["trial"][2])  # small models: one alone leaves the GPU idle
    out: dict[str, Any] = {}
    for share in (1.0, 0.25):
        doc = transformer_spec("bench-gpu-packing", size["sweep_trials"], small, resources={"gpus_per_worker": share})
        r = systems.run_raysweep(doc, "transformer")
        start, end = wall(r)
        out[f"share_{share:g}"] = {
            "wall_s": round(end - start, 1),
            "trials_done": len(r["spans"]),
            "failed": r["failed"],
        }
    out["speedup_packed"] = ddp_scaling.ratio(out["share_1"]["wall_s"], out["share_0.25"]["wall_s"])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description="issue 21's figures on one real GPU")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("bench.gpu needs CUDA: run it on a GPU machine", file=sys.stderr)
        return 2
    size = SIZES["quick" if args.quick else "full"]
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "trial": size["trial"]}
    out["overhead"] = overhead.measure(1, size["overhead_trials"], "ac")
    out["busy"] = busy(size)
    out["vs_torchrun"] = vs_torchrun(size)
    out["packing"] = packing(size)
    print(write_result("gpu", out, args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
