"""The table that ends ``make test-ray-versions``: each Ray version's subset run, from the JUnit
XML pytest wrote for it (``--junitxml``) and the minutes it took.

``python tools/ray_versions.py DIR VERSION...``: DIR holds ``<version>.xml`` and ``<version>.seconds``
per version. Exits 1 when a version failed or did not run, so the make target fails after every
version has run, not at the first that fails.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(xml: Path) -> tuple[int, int, int] | None:
    """(passed, failed, skipped) of one pytest run, or None when it wrote no report."""
    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return total - failed - skipped, failed, skipped


def table(folder: Path, versions: list[str]) -> tuple[str, bool]:
    """The table's text, and whether every version passed."""
    lines = [f"{'Ray':<8} {'passed':>6} {'failed':>6} {'skipped':>7} {'minutes':>7}"]
    ok = True
    for version in versions:
        found = counts(folder / f"{version}.xml")
        seconds_file = folder / f"{version}.seconds"
        minutes = f"{int(seconds_file.read_text()) / 60:.1f}" if seconds_file.exists() else "-"
        if found is None:
            ok = False
            lines.append(f"{version:<8} {'did not run (its venv or pytest failed to start)':>30}")
            continue
        passed, failed, skipped = found
        ok = ok and failed == 0 and passed > 0
        lines.append(f"{version:<8} {passed:>6} {failed:>6} {skipped:>7} {minutes:>7}")
    return "\n".join(lines), ok


def main(argv: list[str]) -> int:
    folder, versions = Path(argv[0]), argv[1:]
    text, ok = table(folder, versions)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
