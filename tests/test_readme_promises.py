"""Each line of README's "What is guaranteed" is quoted, whole, in the docstring of the test that
checks it (issue 33): a promise added without a test, or reworded without its test, fails here."""

from __future__ import annotations

from conftest import ROOT


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_guarantee_is_quoted_by_a_test():
    section = (ROOT / "README.md").read_text().split("## What is guaranteed", 1)[1].split("\n## ", 1)[0]
    promises = [_flat(b) for b in section.split("\n- ")[1:] if not b.startswith("Not guaranteed")]
    assert len(promises) >= 10
    tests = _flat(" ".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py")))
    missing = [p[:80] for p in promises if f'README guarantee: "{p}"' not in tests and f'README: "{p}"' not in tests]
    assert missing == [], missing
