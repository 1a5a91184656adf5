"""A run dir on a URI storage (``raysweep/runs/storage.py``), against a real S3 API (moto's server):
each bad ``--storage`` is one sentence, exit 2, nothing written; a run dir pushed and pulled
whole but for its checkpoints; what it holds counted. No Ray here: the sweeps are in
tests/driver/test_s3_storage.py."""

from __future__ import annotations

import pytest
from conftest import raysweep, write_spec

from raysweep.errors import UserError
from raysweep.runs import storage


def test_a_uri_is_told_from_a_path():
    assert storage.is_uri("s3://b/p?endpoint_override=h:1")
    assert storage.is_uri("gs://b/p")
    assert not storage.is_uri("raysweep_runs")
    assert not storage.is_uri("/abs/path")
    assert not storage.is_uri("file:///abs/path")  # pyarrow's local filesystem: a path as any other


@pytest.mark.parametrize(
    "uri, said",
    [
        ("foo://bucket/runs", "pyarrow opens no filesystem 'foo://'"),
        ("s3://AKIAXX:secretvalue@bucket/runs", "the URI carries credentials"),
        ("s3://bucket/runs?access_key=AKIAXX&secret_key=secretvalue", "the URI carries credentials"),
    ],
)
def test_a_uri_pyarrow_cannot_open_or_that_carries_credentials_is_one_sentence(uri, said):
    with pytest.raises(UserError, match=said) as e:
        storage.parse(uri)
    assert "secretvalue" not in str(e.value)


def test_join_keeps_the_query_options():
    remote = storage.Remote("s3://b/runs?endpoint_override=127.0.0.1:9&scheme=http")
    assert remote.join("smoke", "t1").uri == "s3://b/runs/smoke/t1?endpoint_override=127.0.0.1:9&scheme=http"
    assert remote.join("smoke").name == "smoke"
    assert storage.join("/a/b/", "c") == "/a/b/c"


def test_a_missing_bucket_an_endpoint_that_does_not_answer_and_no_credentials_are_each_one_sentence(s3, monkeypatch):
    with pytest.raises(UserError, match="its bucket 'no-such-bucket' does not exist; create it first"):
        storage.check_writable(storage.parse(s3.uri("no-such-bucket")))
    bucket = s3.bucket()
    closed = s3.uri(bucket).replace(str(s3.port), str(_closed_port()))
    with pytest.raises(UserError, match="its endpoint does not answer; check endpoint_override"):
        storage.check_writable(storage.parse(closed))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.aws either
    with pytest.raises(UserError, match="access denied writing to it: no credentials"):
        storage.check_writable(storage.parse(s3.uri(bucket)))
    assert all(key.endswith("/") for key in s3.keys(bucket))  # at most the prefix's empty marker


def _closed_port() -> int:
    from conftest import free_port

    return free_port()  # bound and released: nothing listens there


def test_push_then_pull_carries_the_run_dir_but_its_checkpoints_and_tunes_own_files(s3, tmp_path):
    bucket = s3.bucket()
    run = storage.parse(s3.uri(bucket)).join("sweep")
    local = tmp_path / "local"
    trial = local / "run_trial_1"
    (trial / "wandb").mkdir(parents=True)
    (local / "spec.json").write_text("{}")
    (local / "trials.jsonl").write_text('{"trial_id": "1"}\n')
    (local / "driver.lock").write_text("pid")
    (local / "tuner.pkl").write_bytes(b"stale")  # Tune's own: Tune syncs it; never pushed back over it
    (trial / "wandb" / "run.wandb").write_bytes(b"w" * 10)
    pusher = storage.Pusher(local, run)
    assert pusher.push() == 3
    assert pusher.push() == 0  # nothing changed
    (local / "trials.jsonl").write_text('{"trial_id": "1"}\n{"trial_id": "2"}\n')
    assert pusher.push() == 1
    keys = s3.keys(bucket)
    assert set(keys) >= {"runs/sweep/spec.json", "runs/sweep/trials.jsonl", "runs/sweep/run_trial_1/wandb/run.wandb"}
    assert not {"runs/sweep/driver.lock", "runs/sweep/tuner.pkl"} & set(keys)

    client = s3.client()  # a checkpoint Tune wrote there, from the trial's node
    client.put_object(Bucket=bucket, Key="runs/sweep/run_trial_1/checkpoint_000001/model.pt", Body=b"m" * 100)
    client.put_object(Bucket=bucket, Key="runs/sweep/run_trial_1/result.json", Body=b'{"score": 1}\n')
    pulled = storage.pull(run, tmp_path / "pulled")
    assert (pulled / "trials.jsonl").read_text().count("\n") == 2
    assert (pulled / "run_trial_1" / "result.json").exists()
    assert not (pulled / "run_trial_1" / "checkpoint_000001").exists()

    held = storage.usage(*run.open())
    assert held.checkpoints == 1 and held.checkpoint_bytes == 100
    assert held.bytes == sum(size for key, size in s3.keys(bucket).items() if key.startswith("runs/sweep/"))


def test_a_bad_storage_exits_2_with_its_sentence_and_writes_nothing(s3, tmp_path):
    spec = write_spec(
        tmp_path / "s.yaml",
        name="s",
        method="grid",
        metric={"name": "score", "goal": "minimize"},
        parameters={"x": {"values": [0.1]}},
        raysweep={"train_loop": "train_loops.smoke:train", "base_config": {"epochs": 1, "sleep": 0.0}},
    )
    cache = tmp_path / "cache"
    for uri, said in [
        (s3.uri("no-such-bucket"), "its bucket 'no-such-bucket' does not exist"),
        ("foo://b/runs", "pyarrow opens no filesystem 'foo://'"),
    ]:
        out = raysweep(
            "run", str(spec), "--storage", uri, "--wandb", "disabled", env={"RAYSWEEP_CACHE_DIR": str(cache)}
        )
        assert out.returncode == 2, out.stderr
        assert said in out.stderr and "Traceback" not in out.stderr
        assert not cache.exists()  # no local copy begun
