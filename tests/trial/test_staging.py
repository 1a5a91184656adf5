"""A warm rank 0 on another node than its trial's process: its checkpoint reaches the storage from
its own node (``trial/staging.py``), and the trial's report reads it there; on the trial's own
node the rank hands over its directory. Against moto's S3 API; no Ray cluster."""

from __future__ import annotations

import queue

from raysweep.placement import RankPlace
from raysweep.trial.cpu_threads import RankThreads
from raysweep.trial.staging import STAGED, unstage
from raysweep.trial.warm_rank import REPORT, RankLink


def link(stage_at: str | None) -> tuple[RankLink, queue.Queue]:
    outbox, inbox = queue.Queue(), queue.Queue()
    inbox.put(True)  # the trial's answer: go on
    place = RankPlace("node", "127.0.0.1", 0, 0, 1)
    return RankLink(0, 1, place, "cpu", None, outbox, inbox, RankThreads(), stage_at=stage_at), outbox


def test_a_rank_on_another_node_stages_its_checkpoint_on_the_storage(s3, tmp_path):
    bucket = s3.bucket()
    stage_at = s3.uri(bucket, f"runs/sweep/trial_1/{STAGED}")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "model.pt").write_bytes(b"m" * 1000)
    rank, outbox = link(stage_at)
    rank.report({"loss": 1.0}, tmp_path / "ckpt")
    message = outbox.get_nowait()
    assert message.kind == REPORT and message.metrics == {"loss": 1.0}
    staged = [k for k in s3.keys(bucket) if k.endswith("/model.pt")]
    assert len(staged) == 1 and staged[0].startswith(f"runs/sweep/trial_1/{STAGED}/"), staged
    with message.checkpoint.as_directory() as d:  # what the trial's process reports to Tune
        assert (tmp_path.joinpath(d, "model.pt")).read_bytes() == b"m" * 1000
    unstage(message.checkpoint)  # once Tune has its own copy
    assert [k for k in s3.keys(bucket) if k.endswith("/model.pt")] == []


def test_a_rank_on_its_trials_node_hands_over_its_directory(tmp_path):
    rank, outbox = link(None)
    rank.report({"loss": 1.0}, tmp_path)
    assert outbox.get_nowait().checkpoint == str(tmp_path)
