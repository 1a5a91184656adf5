"""W&B's sweep-scheduler engines (``scheduler: {engine: ...}``), one record each: whether its own
optimizer searches, which keys of the block it uses (W&B's scheduler warns of the others and
drops them), whether a ``search_space`` is a define-by-run function of its trial, and what the
summary calls its default optimizer. The checks (``engine.py``), the spec (``model.py``), the
summary and the searcher (``search/wandb_optimizer.BUILDERS``) read these, never an engine's name.

Adding an engine is one record here and, if it searches, its builder there: a test holds the two
together (``tests/spec/test_engine_records.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineKind:
    name: str
    searches: bool  # its own optimizer proposes the trials, whatever ``method`` says
    uses: tuple[str, ...]  # the block's keys it reads besides ``engine`` and ``source``
    ignored_note: str = ""  # the warning for a key it does not use, as W&B's scheduler says it ({key})
    defines_by_run: bool = False  # a ``search_space`` is a function of its trial (Optuna's define-by-run)
    default_optimizer: str = ""  # what the summary calls the optimizer it builds without the user's


ENGINE_KINDS: dict[str, EngineKind] = {
    kind.name: kind
    for kind in (
        EngineKind(
            "optuna", searches=True, uses=("optimizer", "search_space"), defines_by_run=True, default_optimizer="TPE"
        ),
        EngineKind(
            "ax",
            searches=True,
            uses=("optimizer",),
            # W&B's: "search_space config is not supported by the Ax engine."
            ignored_note="warning: scheduler.{key}: engine ax searches parameters:, as W&B's Ax engine does",
            default_optimizer="Ax's default generation strategy",
        ),
        EngineKind(
            "wandb",
            searches=False,
            uses=(),
            # W&B's scheduler: "optimizer config is not supported by the wandb engine."
            ignored_note="warning: scheduler.{key}: engine wandb does not use it (W&B's scheduler ignores it too)",
        ),
    )
}
