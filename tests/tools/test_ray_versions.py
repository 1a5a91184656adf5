"""``make test-ray-versions``'s closing table (tools/ray_versions.py): every version gets a row,
and the target fails when one failed or never ran, after all have run."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import ray_versions  # noqa: E402


def junit(path: Path, tests: int, failures: int, errors: int = 0, skipped: int = 0) -> None:
    path.write_text(
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="{tests}" failures="{failures}" '
        f'errors="{errors}" skipped="{skipped}"></testsuite></testsuites>'
    )


def test_each_version_has_its_row_and_a_failure_anywhere_fails_the_target(tmp_path):
    junit(tmp_path / "2.54.0.xml", tests=62, failures=0)
    (tmp_path / "2.54.0.seconds").write_text("502")
    junit(tmp_path / "2.56.0.xml", tests=62, failures=1, errors=1, skipped=2)
    (tmp_path / "2.56.0.seconds").write_text("600")
    # 2.58.0: its venv failed to install, no report
    text, ok = ray_versions.table(tmp_path, ["2.54.0", "2.56.0", "2.58.0"])
    rows = text.splitlines()
    assert rows[1].split() == ["2.54.0", "62", "0", "0", "8.4"]
    assert rows[2].split() == ["2.56.0", "58", "2", "2", "10.0"]
    assert rows[3].startswith("2.58.0") and "did not run" in rows[3]
    assert not ok
    assert ray_versions.main([str(tmp_path), "2.54.0"]) == 0
    assert ray_versions.main([str(tmp_path), "2.54.0", "2.56.0"]) == 1
