"""Errors the user caused, told as sentences: the CLI prints them and exits 2, with no traceback."""

from __future__ import annotations

from collections.abc import Iterable


class UserError(Exception):
    """Something the user can fix: a bad spec, a bad flag, a request the cluster cannot meet."""

    exit_code = 2


class SpecError(UserError):
    """Every problem found in a sweep spec, reported together.

    Each problem is one line, ``key.path: what is wrong``, so a user fixes them all in one go.
    """

    def __init__(self, problems: Iterable[str], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        head = f"{source}: " if source else ""
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"{head}{count} {noun} in the sweep spec:"] + [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))
