"""A matrix cell's driver (tests/end_to_end/test_matrix*.py): ``run`` or ``resume`` a sweep with
raysweep's Python API, the cell's function given where its entry is one. Exit 130 when the sweep
was interrupted (the API raises KeyboardInterrupt), else 0."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from entries import FUNCTIONS  # noqa: E402

import raysweep  # noqa: E402


def main(mode: str, cell_file: str) -> int:
    cell = json.loads(open(cell_file).read())
    function = FUNCTIONS.get(cell["entry"])
    where = {"storage": cell["storage"], "address": cell["address"], "quiet": True}
    try:
        if mode == "run":
            raysweep.run(
                cell["doc"],
                function=function,
                name=cell["name"],
                wandb=cell["wandb"],
                warm_start=cell.get("warm_start", ()),
                **where,
            )
        else:
            raysweep.resume(cell["name"], function=function, **where)
    except KeyboardInterrupt as e:
        print(f"KeyboardInterrupt: {e}", flush=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
