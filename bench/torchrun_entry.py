"""One trial under torchrun (the "seeds' way"): join the process group, run the loop, save reports.

torchrun --standalone --nproc_per_node=N bench/torchrun_entry.py LOOP CONFIG.json OUT.json
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root


def main() -> None:
    loop_name, config_path, out_path = sys.argv[1:4]
    import torch.distributed as dist

    from bench import loops
    from raysweep import trial

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("gloo")
    reports = trial.run_local(getattr(loops, loop_name), json.loads(open(config_path).read()))
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out_path, "w") as f:
            json.dump(reports, f)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
