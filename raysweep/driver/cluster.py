"""The Ray cluster a sweep runs on: started here or joined, checked, and measured in worker
slots per node (``placement.Capacity``; what a trial holds of them is ``placement.py``'s)."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import AuthenticationError

from raysweep import ray_settings
from raysweep.env import CUDA_VISIBLE_DEVICES, FAKE_GPUS, PYTHONPATH, RAY_ADDRESS, RAY_AUTH_MODE
from raysweep.errors import UserError
from raysweep.placement import SLOT, Capacity, nodes_from
from raysweep.private_api import local_gpu_count
from raysweep.trial import devices

LOOPBACK = "127.0.0.1"
log = logging.getLogger("raysweep")


def parse_gpu_set(text: str, device_count: int) -> tuple[int, ...]:
    """``--gpus 0,1,3`` as GPU indices, checked against the ``device_count`` GPUs present.

    Indices count the GPUs this process sees (after any CUDA_VISIBLE_DEVICES already set),
    the way torch and ``nvidia-smi`` number them.
    """
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise UserError(f"--gpus must be comma-separated GPU indices such as 0,1,2,3, got {text!r}")
    gpus = tuple(int(p) for p in parts)
    twice = sorted({g for g in gpus if gpus.count(g) > 1})
    if twice:
        raise UserError(f"--gpus {text} names GPU {twice[0]} twice; list each GPU once")
    if device_count == 0:
        raise UserError(
            f"--gpus {text} needs GPUs, but this machine has none that CUDA can see; "
            "leave --gpus out to run each trial's workers on CPUs"
        )
    missing = [g for g in gpus if g >= device_count]
    if missing:
        present = "GPU 0" if device_count == 1 else f"GPUs 0-{device_count - 1}"
        raise UserError(f"--gpus {text}: GPU {missing[0]} does not exist; this machine has {device_count} ({present})")
    return gpus


def cuda_visible_devices(gpus: tuple[int, ...], inherited: str | None) -> str:
    """CUDA_VISIBLE_DEVICES for the embedded Ray: ``gpus`` index the devices already visible."""
    visible = [d.strip() for d in inherited.split(",")] if inherited else None
    return ",".join(visible[g] if visible else str(g) for g in gpus)


def machine_gpus() -> int:
    """The GPUs an embedded Ray started here will have (``CUDA_VISIBLE_DEVICES`` applied)."""
    fake = os.environ.get(FAKE_GPUS)  # N: an embedded Ray advertises N GPUs that do not exist
    if not fake:
        return local_gpu_count()
    return int(fake) if CUDA_VISIBLE_DEVICES not in os.environ else min(int(fake), len(devices.visible()))


def select_gpus(text: str) -> tuple[int, ...]:
    """``--gpus`` checked against the GPUs this machine shows (``CUDA_VISIBLE_DEVICES`` applied)."""
    return parse_gpu_set(text, machine_gpus())


def _connect(
    address: str, gpus: str | None, dashboard_host: str | None, env: dict[str, str], common: dict[str, Any]
) -> Any:
    """Join the cluster at ``address``: one sentence when it cannot be reached or refuses us."""
    check_embedded_only(address, gpus, dashboard_host)
    probe_address(address)
    try:
        return ray.init(address=address, runtime_env={"env_vars": env}, **common)
    except (ConnectionError, ValueError, RuntimeError, AuthenticationError) as e:
        hint = ""
        if address != "auto" and os.environ.get(RAY_AUTH_MODE) is None:
            hint = (
                "\nIf the cluster uses token authentication (Ray's default for clusters started "
                "with `ray start`), set RAY_AUTH_MODE=token; the token is read from "
                "~/.ray/auth_token or RAY_AUTH_TOKEN."
            )
        raise UserError(f"could not connect to the Ray cluster at {address}: {e}{hint}") from None


def _start_embedded(
    use_gpu: str | bool,
    gpus: str | None,
    cpus_per_worker: float,
    dashboard_host: str | None,
    env: dict[str, str],
    common: dict[str, Any],
) -> Any:
    """A new Ray on this machine, a worker slot per GPU (those of ``--gpus``), else per ``cpus_per_worker``."""
    if gpus is not None:
        if use_gpu is False:
            raise UserError(f"--gpus {gpus} selects GPUs, but the spec sets resources.use_gpu: false")
        selected = select_gpus(gpus)
        # The embedded raylet inherits this and hands out only these devices.
        os.environ[CUDA_VISIBLE_DEVICES] = cuda_visible_devices(selected, os.environ.get(CUDA_VISIBLE_DEVICES))
        n_gpus = len(selected)
    else:
        n_gpus = machine_gpus() if use_gpu is not False else 0
    cpus = os.cpu_count() or 1
    slots = n_gpus if n_gpus > 0 else max(1, int(cpus // cpus_per_worker))
    host = dashboard_host or LOOPBACK
    warning = exposure_warning(host)
    if warning:
        print(warning, file=sys.stderr)
    # The embedded Ray's processes inherit this environment. A job-level runtime_env would
    # carry it too, but then no worker Ray prestarts (one per CPU, Python and Ray imported)
    # could host an actor: every pool, trial and worker actor would wait for a new process.
    os.environ.update(env)
    return ray.init(
        address="local",  # a new Ray even if `ray start` left one running on this machine
        num_cpus=cpus,
        num_gpus=n_gpus,
        resources={SLOT: slots},
        include_dashboard=True,
        dashboard_host=host,
        **common,
    )


def start_or_connect(
    address: str | None,
    use_gpu: str | bool,
    cpus_per_worker: float,
    *,
    gpus: str | None = None,
    dashboard_host: str | None = None,
    gpus_per_worker: float = 1.0,
    memory_per_worker: float = 0.0,
) -> tuple[Capacity, str | None]:
    """Start an embedded Ray (``address`` None) or join a cluster, and measure it; with it, the URL
    of the cluster's Ray dashboard (None without one).

    Args:
        gpus: ``--gpus`` (embedded only): the GPUs the embedded Ray may use, e.g. ``"0,1"``.
        dashboard_host: where the embedded Ray's dashboard listens (default loopback only).
    """
    env = {
        PYTHONPATH: os.pathsep.join(
            dict.fromkeys([os.getcwd(), *filter(None, os.environ.get(PYTHONPATH, "").split(os.pathsep))])
        ),
        **ray_settings.apply(),  # Ray's and Tune's settings, here and in every worker
    }
    common: dict[str, Any] = {
        "log_to_driver": True,  # only trials' own lines reach the terminal (driver/trial_output.py)
        "logging_level": logging.WARNING,
        "configure_logging": True,
    }
    address = address or os.environ.get(RAY_ADDRESS) or None  # set for `ray job submit` entrypoints
    if address:
        context = _connect(address, gpus, dashboard_host, env, common)
    else:
        context = _start_embedded(use_gpu, gpus, cpus_per_worker, dashboard_host, env, common)
    private_token_file()
    url = context.dashboard_url  # what ray.init returned: the one public place that says
    dashboard = (url if url.startswith("http") else f"http://{url}") if url else None
    return measure(use_gpu, cpus_per_worker, gpus_per_worker, memory_per_worker), dashboard


PROBE_TIMEOUT_S = 10.0


def probe_address(address: str) -> None:
    """Fail fast on a HOST:PORT where nothing listens: ``ray.init`` would retry for minutes."""
    if address == "auto" or "://" in address:
        return  # `auto` fails fast by itself; ray:// is Ray Client's own protocol
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UserError(f"--address {address}: expected auto or HOST:PORT, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as e:
        raise UserError(
            f"could not connect to the Ray cluster at {address}: nothing answered there ({e.strerror or e}). "
            "Check the head node's address and port (`ray status` on the head prints them)"
        ) from None


def private_token_file() -> None:
    """Ray's token grants control of the cluster; Ray writes ~/.ray/auth_token readable by all."""
    token = Path.home() / ".ray" / "auth_token"
    if token.exists() and token.stat().st_mode & 0o077:
        token.chmod(0o600)


def exposure_warning(dashboard_host: str) -> str | None:
    """The warning printed when the embedded Ray's dashboard listens beyond this machine."""
    try:
        if ipaddress.ip_address(dashboard_host).is_loopback:
            return None
    except ValueError:  # a host name
        if dashboard_host == "localhost":
            return None
    return (
        f"warning: the Ray dashboard listens on {dashboard_host}, so other machines can reach it; "
        "token authentication stays on, and anyone holding the token (~/.ray/auth_token) can "
        "see and control this cluster and run code on it"
    )


def check_embedded_only(address: str | None, gpus: str | None, dashboard_host: str | None) -> None:
    """``--gpus`` and ``--dashboard-host`` shape the cluster raysweep starts; an existing one has its own."""
    if not address:
        return
    if gpus is not None:
        raise UserError(
            f"--gpus {gpus} confines the Ray that raysweep starts here; with --address {address} each node's "
            "GPUs are what it was started with (e.g. CUDA_VISIBLE_DEVICES=0,1 ray start --num-gpus=2 ...)"
        )
    if dashboard_host is not None:
        raise UserError(
            f"--dashboard-host {dashboard_host} applies to the Ray that raysweep starts here; with --address "
            f"{address} the dashboard is the cluster's (ray start --head --dashboard-host ...)"
        )


def measure(
    use_gpu: str | bool, cpus_per_worker: float, gpus_per_worker: float = 1.0, memory_per_worker: float = 0.0
) -> Capacity:
    """Read the live cluster's nodes and turn them into worker slots."""
    nodes = ray.nodes()
    has_gpu = any(n["Resources"].get("GPU", 0) > 0 for n in nodes if n.get("Alive"))
    grows = autoscaler()
    if use_gpu is True and not has_gpu and not grows:
        raise UserError("resources.use_gpu is true, but the Ray cluster has no GPUs")
    gpu = has_gpu if use_gpu == "auto" else bool(use_gpu)
    managed = any(SLOT in n["Resources"] for n in nodes if n.get("Alive"))  # nodes without it host no workers
    capacity = Capacity(
        nodes_from(nodes, gpu, cpus_per_worker, gpus_per_worker),
        gpu,
        cpus_per_worker,
        managed,
        gpus_per_worker if gpu else 1.0,
        memory_per_worker,
        grows,
    )
    if capacity.total == 0 and not grows:
        raise UserError(
            f"the Ray cluster has no room for a single worker: {cpus_per_worker:g} CPU each"
            + (f", {gpus_per_worker:g} GPU" if gpu else "")
            + (f", {memory_per_worker / 2**30:g} GiB of memory" if memory_per_worker else "")
        )
    return capacity


# Where `ray up` leaves the autoscaler's config on the head node (Ray's own path, which
# `ray start --autoscaling-config` names in cluster.yaml): with it, the cluster can gain nodes.
AUTOSCALER_CONFIG = Path("~/ray_bootstrap_config.yaml")


def autoscaler() -> str | None:
    """Why this cluster can gain nodes (a sentence's end), or None: an autoscaler's config on this
    node with room for more workers than run now. A trial too large for today's nodes then waits."""
    path = AUTOSCALER_CONFIG.expanduser()
    if not path.is_file():
        return None
    import yaml

    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    most = config.get("max_workers") if isinstance(config, dict) else None
    if not isinstance(most, int) or most <= 0:
        return None
    return f"its autoscaler may add nodes (max_workers {most} in {AUTOSCALER_CONFIG})"
