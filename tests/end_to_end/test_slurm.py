"""``raysweep slurm``: the batch script it writes, and that script run for real on this machine.

No SLURM here: ``scontrol`` and ``srun`` are small shims on PATH (``srun`` drops its options
and runs the command on this machine), with the SLURM_* variables of a one-node job set. The
script then really starts a Ray head, runs a sweep against it and stops Ray.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, cli_env, raysweep, show, write_spec

SMOKE = "search_spaces/smoke.yaml"

SRUN = """#!/bin/bash
# srun stand-in: drop srun's options (-w NODE takes a value), run the command on this machine.
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in -w | --nodelist) shift 2 ;; *) shift ;; esac
done
exec "$@"
"""
SCONTROL = """#!/bin/bash
# scontrol stand-in: `scontrol show hostnames a,b` prints a and b, one a line.
[[ $1 == show && $2 == hostnames ]] && tr ',' '\\n' <<< "$3"
"""


def test_script_for_two_gpu_nodes(tmp_path):
    out = raysweep(
        "slurm",
        SMOKE,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--cpus-per-node",
        "32",
        "--time",
        "2:00:00",
        "--partition",
        "gpu",
        "--sbatch=--qos=high",
        "--requeue",
        "-o",
        str(tmp_path / "job.sbatch"),
        "--",
        "--count",
        "3",
        "--wandb",
        "offline",
    )
    assert out.returncode == 0, out.stderr
    script = (tmp_path / "job.sbatch").read_text()
    assert subprocess.run(["bash", "-n", str(tmp_path / "job.sbatch")], capture_output=True).returncode == 0
    assert os.access(tmp_path / "job.sbatch", os.X_OK)
    lines = script.splitlines()
    for expected in [
        "#!/bin/bash",
        "#SBATCH --job-name=smoke",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=32",
        "#SBATCH --gpus-per-task=4",
        "#SBATCH --time=2:00:00",
        "#SBATCH --partition=gpu",
        "#SBATCH --qos=high",
        "#SBATCH --output=smoke-%j.out",
        "export RAY_AUTH_MODE=token",
        'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
        "gpus=${SLURM_GPUS_ON_NODE:-0}  # read on the first node: the job's nodes are alike",
        "cpus=${SLURM_CPUS_ON_NODE:-$(nproc)}",
        '    start_node "$head" --head --node-ip-address="$head_ip" --port="$PORT" --dashboard-host=127.0.0.1 \\',
        '        start_node "$node" --address="$head_ip:$PORT"',
        '"$BIN/python" -m raysweep run search_spaces/smoke.yaml --count 3 --wandb offline --resume-existing --address "$head_ip:$PORT" &',
        "#SBATCH --signal=B:TERM@180",
        "#SBATCH --requeue",
        '    "$BIN/python" -m raysweep.slurm_drain "$head_ip:$PORT" 120',  # two thirds of the 180 s notice
        "trap leave TERM",
        "trap cleanup EXIT",
        "RAY_TMP=${TMPDIR:-/tmp}/raysweep-${SLURM_JOB_ID:-$$}",
        '        srun --nodes=1 --ntasks=1 -w "$node" pkill -KILL -f -- "$RAY_TMP" >/dev/null 2>&1',
    ]:
        assert expected in lines, expected
    # Jobs may share a node: no fixed port, and no `ray stop` (it ends every Ray on the node)
    assert "ray stop" not in script and "6379" not in script and "8265" not in script
    assert (
        "PORT=  # the head" in script
        and '--dashboard-port="$DASHBOARD_PORT" --ray-client-server-port="$CLIENT_PORT"' in script
    )
    assert f"BIN=${{RAYSWEEP_BIN:-{os.path.dirname(sys.executable)}}}" in script
    assert '--resources="{\\"raysweep_slot\\": $slots}"' in script
    assert (
        'RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 srun --nodes=1 --ntasks=1 -w "$node" "$BIN/python" -m raysweep.slurm_node '
        '"$BIN/ray"'
    ) in script
    assert "~/.ray/auth_token" in script and "$HOME is\n# shared" in script


def test_script_to_stdout_uses_the_specs_cpus_per_worker(tmp_path):
    spec = write_spec(
        tmp_path / "half.yaml",
        name="half sweep",
        method="grid",
        train_loop="train_loops.smoke:train",
        parameters={"x": {"value": 1}},
        resources={"cpus_per_worker": 2},
    )
    out = raysweep("slurm", str(spec))
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --job-name=half-sweep" in out.stdout and "#SBATCH --nodes=1" in out.stdout
    assert "int(c / 2)" in out.stdout and "--gpus-per-task" not in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "--address", "auto"], "leave --address out of the arguments after --"),
        (["--", "--gpus=0"], "leave --gpus out"),
        (["--nodes", "0"], "--nodes must be >= 1, got 0"),
        (["--sbatch", "qos=high"], "--sbatch takes sbatch options such as --sbatch=--qos=high, got 'qos=high'"),
        (["--", "--set", "method=grud"], "method"),
        (
            ["--gpus-per-node", "4", "--", "--set", "parameters.num_gpus.value=6"],
            "with --nodes 1 --gpus-per-node 4: num_gpus=6 can never be placed",
        ),
    ],
)
def test_refusals_are_one_sentence_and_exit_2(args, message):
    out = raysweep("slurm", SMOKE, *args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--partition", "gpu\nrm -rf ~"],
        ["--time", "1:00:00\ntouch /tmp/owned"],
        ["--account", "a\rb"],
        ["--sbatch=--qos=high\ntouch /tmp/owned"],
        ["--", "--name", "a\ntouch /tmp/owned"],
    ],
    ids=["partition", "time", "account", "sbatch", "run-flag"],
)
def test_a_line_break_in_any_value_is_refused(args):
    out = raysweep("slurm", SMOKE, *args)
    assert out.returncode == 2 and "a line break can't go into a batch script" in out.stderr, out.stderr


def test_values_are_written_as_given_never_substituted_again(tmp_path):
    out = raysweep("slurm", SMOKE, "--account", "@BIN@-team", "--partition", "@PORT@")
    assert out.returncode == 0, out.stderr
    assert "#SBATCH --account=@BIN@-team" in out.stdout and "#SBATCH --partition=@PORT@" in out.stdout
    script = tmp_path / "job.sbatch"
    script.write_text(out.stdout)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_a_bad_run_flag_is_refused_when_the_script_is_written():
    out = raysweep("slurm", SMOKE, "--", "--cuont", "3")
    assert out.returncode == 2 and "--cuont" in out.stderr


def _ray_processes(temp_dir: Path) -> list[psutil.Process]:
    """One job's Ray only: the processes whose command line names its Ray temp dir."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if str(temp_dir) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid():
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def _shims(tmp_path: Path) -> Path:
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    return shims


def _job_env(tmp_path: Path, shims: Path, job_id: str, nodes: int = 1) -> dict[str, str]:
    env = cli_env() | {
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": job_id,
        # every node of every job of the test on this machine, each a Ray node of its own
        "SLURM_JOB_NODELIST": ",".join(f"node{i:03d}" for i in range(1, nodes + 1)),
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_CPUS_ON_NODE": "1",
        "SLURM_SUBMIT_DIR": str(ROOT),
        "HOME": str(tmp_path / "home"),  # a fresh home: no Ray token yet, as on a new cluster
    }
    env.pop("RAY_AUTH_MODE")  # the script sets it
    env.pop("TMPDIR", None)  # Ray's temp dir: /tmp/raysweep-JOB (its sockets' paths must stay short)
    return env


def _write_job(tmp_path: Path, name: str, *sizes: str) -> Path:
    script = tmp_path / f"{name}.sbatch"
    out = raysweep(
        "slurm",
        SMOKE,
        *sizes,
        "-o",
        str(script),
        "--",
        "--storage",
        str(tmp_path / name),
        "--wandb",
        "disabled",
        "--set",
        "raysweep.base_config.sleep=1",
        "--set",
        "raysweep.base_config.epochs=4",
        *(("--set", "parameters.num_gpus.value=2") if sizes else ()),
    )
    assert out.returncode == 0, out.stderr
    return script


def _wait_for_a_report(job: subprocess.Popen, trials: Path) -> None:
    deadline = time.time() + 300
    while time.time() < deadline and not (trials.exists() and '"iterations": 1' in trials.read_text()):
        assert job.poll() is None, job.communicate()
        time.sleep(0.3)
    assert trials.exists(), "the job's sweep never reported"


@pytest.mark.ray
def test_two_jobs_share_a_node_and_ending_one_leaves_the_other_running(tmp_path):
    """Two jobs on one node, as SLURM may place them: each starts its own Ray (ports free when it
    starts, its own temp dir). SLURM sends job A SIGTERM before its limit (--signal=B:TERM@180):
    A drains its node (its trial leaves at its next checkpoint, a preemption), saves its sweep and
    ends its own Ray only; B's sweep runs on to every trial done. The same
    script run again (a requeued A) continues A's sweep to the end, and no Ray of either is left.
    Job B has two nodes of one slot each, and its trials two workers: each spans both nodes."""
    shims = _shims(tmp_path)
    tag = f"t{os.getpid()}"
    jobs = {
        "a": (_write_job(tmp_path, "a"), _job_env(tmp_path, shims, f"{tag}a")),
        "b": (_write_job(tmp_path, "b", "--nodes", "2"), _job_env(tmp_path, shims, f"{tag}b", nodes=2)),
    }
    temp = {name: Path("/tmp") / f"raysweep-{tag}{name}" for name in jobs}
    started = {
        name: subprocess.Popen(
            ["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
        )
        for name, (script, env) in jobs.items()
    }
    try:
        for name, job in started.items():
            _wait_for_a_report(job, tmp_path / name / "smoke" / "trials.jsonl")
        assert _ray_processes(temp["a"]) and _ray_processes(temp["b"])  # the pattern finds each job's live Ray
        started["a"].send_signal(signal.SIGTERM)
        stdout, stderr = started["a"].communicate(timeout=180)
        assert started["a"].returncode == 130, stdout + stderr
        assert "raysweep resume" in stderr
        # it drained its node first: its trial left at its next checkpoint, nothing started after
        assert "raysweep: the job ends: 1 node(s) drain" in stdout and "every trial left" in stdout, stdout
        assert "raysweep: Ray head on node001" in stdout and "1 node(s), 1 slot(s) each" in stdout
        assert "ssh -L" in stdout and "cluster: 1 CPU worker slot(s) on 1 node(s)" in stdout
        assert _ray_processes(temp["a"]) == []  # A ended its own Ray...
        assert _ray_processes(temp["b"]) and started["b"].poll() is None  # ...and nothing of B's

        stdout, stderr = started["b"].communicate(timeout=400)
        assert started["b"].returncode == 0, stdout + stderr
        assert "2 node(s), 1 slot(s) each" in stdout and "cluster: 2 CPU worker slot(s) on 2 node(s)" in stdout
        assert "sweep smoke finished" in stdout and "3 finished, 0 failed" in stdout
        assert {t["num_workers"] for t in show(tmp_path / "b" / "smoke")["trials"]} == {2}  # one rank on each node
        assert _ray_processes(temp["b"]) == []
    finally:
        for job in started.values():
            job.kill()
    token = tmp_path / "home" / ".ray" / "auth_token"
    assert token.stat().st_mode & 0o777 == 0o600  # the script wrote the cluster's token, private

    script, env = jobs["a"]
    again = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=400)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "its run dir exists; continuing it" in again.stdout
    assert "sweep smoke finished" in again.stdout and "3 finished, 0 failed" in again.stdout
    rows = show(tmp_path / "a" / "smoke")["trials"]
    assert sorted(t["config"]["x"] for t in rows) == [0.1, 0.3, 0.5] and all(t["status"] == "done" for t in rows), rows
    assert [t.get("preemptions") or 0 for t in rows].count(1) == 1, rows  # the one running left, and went on
    assert _ray_processes(temp["a"]) == []


def test_a_head_that_ends_as_it_starts_is_started_again(tmp_path):
    """The requeued job of the test above once lost its head at once (a full run, 2026-11-28), and
    the script waited its whole start timeout (300 s) for a head that was gone. Here the head's
    port (--port) is held by another process when the job starts: Ray's GCS fails to bind it and
    ``ray start`` ends (about 40 s later). The script sees the head's step end, starts Ray again
    (the port is free by then) and runs the sweep."""
    import socket

    holder = socket.socket()
    holder.bind(("", 0))  # every address, whichever the head binds
    holder.listen()
    port = holder.getsockname()[1]
    script = tmp_path / "held.sbatch"
    args = ("--storage", str(tmp_path / "held"), "--wandb", "disabled", "--count", "1")
    out = raysweep("slurm", SMOKE, "--port", str(port), "-o", str(script), "--", *args)
    assert out.returncode == 0, out.stderr
    job_id = f"t{os.getpid()}held"
    env = _job_env(tmp_path, _shims(tmp_path), job_id)
    job = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        gcs_log = Path("/tmp") / f"raysweep-{job_id}" / "session_latest" / "logs" / "gcs_server.out"
        deadline = time.time() + 120
        while not (gcs_log.exists() and "Failed to start the grpc server" in gcs_log.read_text(errors="replace")):
            assert time.time() < deadline and job.poll() is None, "the head's GCS never failed to bind its port"
            time.sleep(0.5)
        holder.close()  # the first start has failed: the next one finds the port free
        stdout, stderr = job.communicate(timeout=250)  # without the retry: the start timeout, 300 s
    finally:
        holder.close()
        job.kill()
    assert job.returncode == 0, stdout + stderr
    assert stderr.count("raysweep: the Ray head on node001 ended as it started; starting Ray again") == 1, stderr
    assert "sweep smoke finished" in stdout, stdout
    assert _ray_processes(Path("/tmp") / f"raysweep-{job_id}") == []
