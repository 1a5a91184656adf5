"""README is a front page and docs/ holds the guides (issue 52), checked as README was.

Each line of docs/guarantees.md is quoted, whole, in the docstring of the test that checks it
(issue 33): a promise added without a test, or reworded without its test, fails here. Every
relative link of README and the guides leads to a file (and a heading, for ``#anchor``), and
README's sweep file is one raysweep accepts.
"""

from __future__ import annotations

import re

import yaml
from conftest import ROOT

from raysweep.spec import parse_spec

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_guarantee_is_quoted_by_a_test():
    section = (ROOT / "docs" / "guarantees.md").read_text().split("\n## ", 1)[0]
    promises = [_flat(b) for b in section.split("\n- ")[1:] if not b.startswith("Not guaranteed")]
    assert len(promises) >= 10
    tests = _flat(" ".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py")))
    missing = [p[:80] for p in promises if f'Guarantee: "{p}"' not in tests]
    assert missing == [], missing


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_readme_and_the_guides_leads_somewhere():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.M)
                if anchor not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}")
    assert broken == []


def test_readme_is_a_front_page_and_links_every_guide():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    guides = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"\(docs/([\w-]+\.md)\)", readme))
    assert guides <= linked, guides - linked


def test_every_figure_the_readme_claims_is_in_the_benchmarks_tables():
    """Issue 76: the README's claims quote docs/benchmarks.md's tables, not a diary's paragraph."""
    readme = (ROOT / "README.md").read_text()
    claims = readme.split("## In figures", 1)[1].split("\n## ", 1)[0]
    figures = set(re.findall(r"\d+\.\d+", claims))
    tables = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(figures) >= 10 and {f for f in figures if f not in tables} == set()


def test_readmes_sweep_file_is_one_raysweep_runs():
    block = re.search(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S).group(1)
    spec = parse_spec(yaml.safe_load(block))
    assert spec.method == "bayes" and spec.world_sizes == {1, 2, 4} and spec.train_loop == "train_loops.char_lm:train"
