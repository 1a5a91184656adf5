"""``raysweep slurm``: a SLURM batch script that starts Ray on its nodes and runs one sweep.

The script is a plain template (below) with ``@NAME@`` holes, so what it does can be read
top to bottom: Ray's head on the first node of the allocation, a Ray worker on each other node,
every node advertising ``raysweep_slot`` (its GPUs, or CPUs / cpus_per_worker), a wait until all
nodes joined, then ``python -m raysweep run SPEC --address HEAD:PORT``. Jobs may share a node:
each has its own ports (free ones, found on the head when it starts: ``slurm_node.py``) and its
own Ray temp dir on every node, and at its end it ends its own Ray processes only (``ray stop``
would end every Ray on the node, other jobs' too).
"""

from __future__ import annotations

import math
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from raysweep.errors import UserError
from raysweep.placement import Capacity, Node, never_placed

TEMPLATE = r"""#!/bin/bash
# One raysweep sweep as a SLURM job, written by:
#   @COMMAND@
# Submit it from the project directory (train loops are imported from there): sbatch FILE
# The first node runs Ray's head, every other node a Ray worker; each node advertises
# raysweep_slot = its GPUs (without GPUs: its CPUs / cpus_per_worker, @CPUS_PER_WORKER@). One task
# per node, so the per-task CPUs and GPUs below are per node; srun steps inherit them.
#SBATCH --job-name=@JOB_NAME@
#SBATCH --nodes=@NODES@
#SBATCH --ntasks-per-node=1
#SBATCH --signal=B:TERM@@SIGNAL_S@
@SBATCH_LINES@

set -uo pipefail
cd "${SLURM_SUBMIT_DIR:-$PWD}"

BIN=${RAYSWEEP_BIN:-@BIN@}  # the virtualenv with raysweep and ray, on every node
PORT=@PORT@  # the head's port (raysweep slurm --port); empty: a free one, found when the job starts
# Ray's token authentication stays on: every node and the sweep read the token from
# ~/.ray/auth_token, written here if there is none, and $HOME is
# shared by the nodes of a cluster. The file stays private: it grants control of the cluster.
export RAY_AUTH_MODE=token
"$BIN/ray" get-auth-token --generate >/dev/null || exit 1
chmod 600 ~/.ray/auth_token

nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))
head=${nodes[0]}
head_ip=$(srun --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | awk '{print $1}')
gpus=${SLURM_GPUS_ON_NODE:-0}  # read on the first node: the job's nodes are alike
cpus=${SLURM_CPUS_ON_NODE:-$(nproc)}
slots=$(awk -v g="$gpus" -v c="$cpus" 'BEGIN { print (g > 0 ? g : int(c / @CPUS_PER_WORKER@)) }')

# This job's own Ray, so that jobs SLURM places on one node never meet: a temp dir of its own on
# every node (sessions, logs, sockets), and the head's ports free on the head as the job starts
# (every node's own agents get free ports too: raysweep.slurm_node).
RAY_TMP=${TMPDIR:-/tmp}/raysweep-${SLURM_JOB_ID:-$$}
ASKED_PORT=$PORT

# start_node NODE [ray start options]: one Ray node that blocks (`ray start --block`, through
# raysweep.slurm_node for its free ports), as a background srun step. No drain on SIGTERM: its
# GCS may be gone already, and Ray would wait 30 s for it before exiting (the allocation with it).
start_node() {
    local node=$1
    shift
    RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0 srun --nodes=1 --ntasks=1 -w "$node" "$BIN/python" -m raysweep.slurm_node "$BIN/ray" \
        --disable-usage-stats --temp-dir="$RAY_TMP" --num-cpus="$cpus" --num-gpus="$gpus" \
        --resources="{\"raysweep_slot\": $slots}" "$@" &
}

# When the script ends (the sweep finished or failed, or the job was cancelled): end this job's
# Ray and nothing else. Its srun steps first (each `ray start --block` ends its node's Ray),
# then, on every node, whatever process is left that names this job's temp dir.
cleanup() {
    kill $(jobs -p) 2>/dev/null
    wait
    for node in "${nodes[@]}"; do
        srun --nodes=1 --ntasks=1 -w "$node" pkill -KILL -f -- "$RAY_TMP" >/dev/null 2>&1
    done
}
trap cleanup EXIT

# start_ray: the head on free ports (found on the head just before), then a worker on every other
# node, then a wait until every node has joined. Exit status 3: the head's step ended before Ray
# answered (a port taken between finding it free and binding it, say): start again, on new free ports.
start_ray() {
    read -r free_port DASHBOARD_PORT CLIENT_PORT < <(srun --nodes=1 --ntasks=1 -w "$head" "$BIN/python" -m raysweep.slurm_node --ports 3)
    [[ -n ${CLIENT_PORT:-} ]] || { echo "raysweep: could not find free ports on $head" >&2; exit 1; }
    PORT=${ASKED_PORT:-$free_port}
    echo "raysweep: Ray head on $head ($head_ip:$PORT), ${#nodes[@]} node(s), $slots slot(s) each, Ray's files in $RAY_TMP"
    start_node "$head" --head --node-ip-address="$head_ip" --port="$PORT" --dashboard-host=127.0.0.1 \
        --dashboard-port="$DASHBOARD_PORT" --ray-client-server-port="$CLIENT_PORT"
    local head_step=$!
    for node in "${nodes[@]:1}"; do
        start_node "$node" --address="$head_ip:$PORT"
    done
    "$BIN/python" - "$head_ip:$PORT" "${#nodes[@]}" "$head_step" <<'EOF'
import os, sys, threading, time
import ray

address, want, head_step = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def ended(pid: str) -> bool:  # the head's srun step exited (a zombie not yet reaped counts)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def watch() -> None:  # beside ray.init, which can hang on a port another process holds
    while not ended(head_step):
        time.sleep(1)
    os._exit(3)


threading.Thread(target=watch, daemon=True).start()
deadline = time.time() + @START_TIMEOUT@
while True:
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        break
    except Exception as e:  # the head is still starting
        if time.time() > deadline:
            sys.exit(f"raysweep: the Ray head at {address} did not start: {e}")
        time.sleep(2)
while (alive := sum(n["Alive"] for n in ray.nodes())) < want:
    if time.time() > deadline:
        sys.exit(f"raysweep: only {alive} of {want} Ray nodes started within @START_TIMEOUT@ s")
    time.sleep(2)
EOF
}

for attempt in 1 2 3; do
    start_ray && break
    status=$?
    kill $(jobs -p) 2>/dev/null
    wait
    if [[ $status != 3 ]]; then
        exit 1
    elif [[ $attempt == 3 ]]; then
        echo "raysweep: the Ray head on $head ended as it started, 3 times; its log: $RAY_TMP/session_latest/logs" >&2
        exit 1
    fi
    echo "raysweep: the Ray head on $head ended as it started; starting Ray again" >&2
done
echo "raysweep: Ray dashboard on $head at 127.0.0.1:$DASHBOARD_PORT; to open it from your machine:"
echo "  ssh -L $DASHBOARD_PORT:127.0.0.1:$DASHBOARD_PORT $head   (add -J LOGIN_NODE if $head is reached through one), then http://127.0.0.1:$DASHBOARD_PORT"

# The sweep runs in the background so that SIGTERM (SLURM's --signal before the time limit,
# scancel --signal=TERM --batch, a preemption) reaches this script. It drains this job's Ray nodes
# first, with @DRAIN_S@ s as their deadline: each trial saves at its next checkpoint and leaves,
# as from a spot node (raysweep.slurm_drain); then the sweep saves its state and exits. A
# resubmitted or requeued job continues the same sweep (--resume-existing) from those checkpoints
# instead of refusing its name.
leave() {
    "$BIN/python" -m raysweep.slurm_drain "$head_ip:$PORT" @DRAIN_S@
    kill -TERM "$sweep" 2>/dev/null
}
trap leave TERM
"$BIN/python" -m raysweep run @RUN_ARGS@ --resume-existing --address "$head_ip:$PORT" &
sweep=$!
wait "$sweep"
status=$?
while kill -0 "$sweep" 2>/dev/null; do  # wait returned for the trapped signal: the sweep is saving
    wait "$sweep"
    status=$?
done
exit $status
"""


@dataclass(frozen=True)
class SlurmJob:
    """What the batch script asks SLURM for, and the sweep it runs."""

    spec: str
    run_args: tuple[str, ...] = ()
    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_node: int | None = None
    cpus_per_worker: float = 1.0
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    job_name: str = "raysweep"
    port: int | None = None  # the head's port; None: a free one, found when the job starts
    sbatch: tuple[str, ...] = field(default_factory=tuple)  # more #SBATCH options, verbatim
    bin_dir: str = str(Path(sys.executable).parent)
    start_timeout_s: int = 300
    signal_s: int = 180  # SIGTERM this long before the time limit: trials leave at a checkpoint, the sweep saves
    requeue: bool = False  # SLURM brings the job back after a preemption or node failure


def allocation(job: SlurmJob) -> Capacity | None:
    """The Ray cluster the job will have: ``nodes`` alike, each with its GPUs as slots (or its CPUs
    / cpus_per_worker); None when the script learns the CPUs only when it runs."""
    if job.gpus_per_node:
        slots, cpus = job.gpus_per_node, float(job.cpus_per_node or job.gpus_per_node * job.cpus_per_worker)
    elif job.cpus_per_node:
        slots, cpus = int(job.cpus_per_node // job.cpus_per_worker), float(job.cpus_per_node)
    else:
        return None
    nodes = tuple(Node(f"node{i}", f"node{i}", slots, cpus, float(job.gpus_per_node)) for i in range(job.nodes))
    return Capacity(nodes, job.gpus_per_node > 0, job.cpus_per_worker, managed_slots=True)


def check_sizes(job: SlurmJob, sizes: set[int]) -> str | None:
    """Refuse a job none of whose trials its nodes can place; a note naming the sizes that never fit."""
    capacity = allocation(job)
    never = never_placed(sizes, capacity) if capacity else {}
    where = f"--nodes {job.nodes}" + (f" --gpus-per-node {job.gpus_per_node}" if job.gpus_per_node else "")
    if never and len(never) == len(sizes):
        raise UserError(f"with {where}: {never[min(never)]}")
    if never:
        return f"note: with {where}, trials with num_gpus in {sorted(never)} will fail at once: {never[min(never)]}"
    return None


def drain_seconds(signal_s: int) -> int:
    """The nodes' deadline once the job is signalled: two thirds of the notice, the rest left for
    the sweep to save its state and Ray to end before SLURM's SIGKILL."""
    return max(1, signal_s * 2 // 3)


def sbatch_lines(job: SlurmJob) -> list[str]:
    lines = []
    if job.cpus_per_node:
        lines.append(f"--cpus-per-task={job.cpus_per_node}")
    if job.gpus_per_node:
        lines.append(f"--gpus-per-task={job.gpus_per_node}")
    if job.time:
        lines.append(f"--time={job.time}")
    if job.partition:
        lines.append(f"--partition={job.partition}")
    if job.account:
        lines.append(f"--account={job.account}")
    if job.requeue:
        lines.append("--requeue")
    lines.append(f"--output={job.job_name}-%j.out")
    lines += job.sbatch
    return [f"#SBATCH {line}" for line in lines]


def render(job: SlurmJob, command: str) -> str:
    """The batch script for ``job``; ``command`` is the command line that wrote it (a comment)."""
    if job.nodes < 1:
        raise UserError(f"--nodes must be >= 1, got {job.nodes}")
    if job.gpus_per_node < 0:
        raise UserError(f"--gpus-per-node must be >= 0, got {job.gpus_per_node}")
    if job.cpus_per_node is not None and job.cpus_per_node < 1:
        raise UserError(f"--cpus-per-node must be >= 1, got {job.cpus_per_node}")
    bad = [o for o in job.sbatch if not o.startswith("--")]
    if bad:
        raise UserError(f"--sbatch takes sbatch options such as --sbatch=--qos=high, got {bad[0]!r}")
    given = {
        "--time": job.time,
        "--partition": job.partition,
        "--account": job.account,
        "--job-name": job.job_name,
        "the spec path": job.spec,
        "the command line": command,
    }
    given |= {f"--sbatch {o!r}": o for o in job.sbatch} | {f"the run flag {a!r}": a for a in job.run_args}
    for what, value in given.items():
        if value is not None and any(c in value for c in "\n\r\0"):
            raise UserError(f"{what}: a line break can't go into a batch script (it would run as a command of its own)")
    cpw = job.cpus_per_worker
    values = {
        "COMMAND": command,
        "JOB_NAME": job.job_name,
        "NODES": str(job.nodes),
        "SBATCH_LINES": "\n".join(sbatch_lines(job)),
        "BIN": shlex.quote(job.bin_dir),
        "PORT": "" if job.port is None else str(job.port),
        "CPUS_PER_WORKER": str(int(cpw)) if cpw == math.floor(cpw) else str(cpw),
        "START_TIMEOUT": str(job.start_timeout_s),
        "RUN_ARGS": shlex.join([job.spec, *job.run_args]),
    }
    values["SIGNAL_S"] = str(job.signal_s)
    values["DRAIN_S"] = str(drain_seconds(job.signal_s))
    # One pass over the template's own holes: a value holding @BIN@ is written as it is.
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], TEMPLATE)
