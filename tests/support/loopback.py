"""Ray nodes of one cluster on this machine, each at its own loopback address (127.0.0.2, .3, ...)
with its own ports, as Ray's own tests add nodes; a node may have a disk of its own (``own_disk``:
its processes see an empty tmpfs over that directory, as a second machine would), and a node can
be killed as a machine dies."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import psutil
from conftest import RAY, ROOT, cli_env, driver_script, free_port

# The head's GCS finds a killed node dead after 3 failed health checks 1 s apart (Ray's default:
# 5, 3 s apart). What the tests wait for after a kill is this, not raysweep.
NODE_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


def start_node(ip: str, name: str, head: str | None = None, own_disk: str | None = None, slots: int = 2) -> int:
    """One node at ``ip`` (the head when ``head`` is None, else joining it); its raylet's port.
    ``own_disk``: a directory the node sees empty (needs root: a mount namespace of its own)."""
    raylet_port = free_port()
    args = [
        RAY,
        "start",
        f"--node-ip-address={ip}",
        f"--num-cpus={max(2, slots)}",
        f"--num-gpus={max(2, slots)}",
        "--disable-usage-stats",
        "--resources",
        json.dumps({"raysweep_slot": slots, name: 1} if slots else {name: 1}),
        f"--node-manager-port={raylet_port}",
    ]
    if head is None:
        args += ["--head", f"--port={head_port_for(ip)}", "--include-dashboard=false"]
    else:
        args += [
            f"--address={head}",
            f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            # worker processes bind the machine's ports too: each node its own range
            f"--min-worker-port={worker_ports(ip)}",
            f"--max-worker-port={worker_ports(ip) + 299}",
        ]
    if own_disk is not None:  # its own mount namespace: Ray's daemons it starts stay in it
        args = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{own_disk}" && exec "$@"', "sh", *args]
    out = subprocess.run(
        args, capture_output=True, text=True, cwd=ROOT, env=cli_env() | NODE_DEATH | {"LOOPBACK_NODE": name}
    )  # its processes know their node
    assert out.returncode == 0, out.stdout + out.stderr
    return raylet_port


def worker_ports(ip: str) -> int:
    """The first of the 300 worker ports of the node at ``ip`` (127.0.0.2 to 127.0.0.42): above a
    head's (Ray's default, 10002-19999), below the ephemeral ports."""
    octet = int(ip.rsplit(".", 1)[1])
    assert 2 <= octet <= 42, ip
    return 20000 + 300 * (octet - 2)


_HEAD_PORTS: dict[str, int] = {}


def head_port_for(ip: str) -> int:
    return _HEAD_PORTS.setdefault(ip, free_port())


def kill_node(raylet_port: int) -> int:
    """SIGKILL the worker node's raylet and everything under it (its workers and agents); how many
    processes that was (0: the node had ended already, as a drained node does once it is idle)."""
    raylet = next(
        (
            p
            for p in psutil.process_iter(["name", "cmdline"])
            if p.info["name"] == "raylet" and f"--node_manager_port={raylet_port}" in (p.info["cmdline"] or [])
        ),
        None,
    )
    if raylet is None:
        return 0
    tree = [*raylet.children(recursive=True), raylet]
    for p in tree:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(tree, timeout=30)
    return len(tree)


def node_ids(address: str, names) -> dict[str, str]:
    """Each named node's id, asked once as its test starts: under load a driver process takes
    seconds to connect, and the drain must come while the trial still runs."""
    body = (
        f"import json; print(json.dumps({{r: n['NodeID'] for n in ray.nodes() if n['Alive'] "
        f"for r in n['Resources'] if r in {sorted(names)!r}}}))"
    )
    out = driver_script(address, body)
    assert out.returncode == 0, out.stderr
    ids = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(ids) == sorted(names), ids
    return ids


def drain(address: str, node: str, deadline_s: int) -> float:
    """Drain the node (its id) as a spot reclaim does; returns when the GCS had taken it (epoch seconds)."""
    cmd = [RAY, "drain-node", f"--address={address}", f"--node-id={node}"]
    cmd += ["--reason=DRAIN_NODE_REASON_PREEMPTION", "--reason-message=spot reclaim"]
    cmd += [f"--deadline-remaining-seconds={deadline_s}"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return time.time()
