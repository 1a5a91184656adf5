"""The pairwise matrix, part 2 of 3 (every third cell of ``tests/support/matrix/cells.py``, from
the 2-th): each cell a sweep of two short trials on this module's Ray cluster, run end to end and
read by every reader (``tests/support/matrix/check.py`` says what is checked). Three modules, so
that two run at once (``make test``'s two workers)."""

from __future__ import annotations

import pytest
from conftest import cli_env

from tests.support.matrix.cells import CELLS
from tests.support.matrix.check import check_cell, run_cell

pytestmark = pytest.mark.ray
MINE = CELLS[1::3]


@pytest.mark.parametrize("cell", MINE, ids=[c.id for c in MINE])
def test_the_cell_runs_end_to_end_and_every_reader_reads_it(tmp_path, ray_cluster, cell):
    check_cell(cell, run_cell(cell, tmp_path, ray_cluster, cli_env()), tmp_path)
