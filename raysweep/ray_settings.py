"""The Ray and Tune settings raysweep makes, each with its reason. The driver sets them when it
starts or joins Ray (``apply``) and passes the workers' share on to every process of the sweep;
nothing is set on import."""

import os

from raysweep.env import (
    PENDING_TRIALS,
    PG_RETRY_MAX,
    PG_RETRY_MIN,
    RAY_AIR_NEW_OUTPUT,
    RAY_TRAIN_V2_ENABLED,
    RESOURCE_REPORT,
    TRAIN_POLL,
    TUNE_DISABLE_AUTO_CALLBACK_LOGGERS,
    TUNE_DISABLE_STRICT_METRIC_CHECKING,
    TUNE_FUNCTION_THREAD_TIMEOUT_S,
    WORKER_NICENESS,
)

# In the driver and every worker; a value already in the driver's environment wins.
DEFAULTS = {
    # Tune's own console tables would bury raysweep's one-line status; the monitor prints instead.
    RAY_AIR_NEW_OUTPUT: "0",
    RAY_TRAIN_V2_ENABLED: "1",
    # Ray Train's controller polls its workers (by default every few seconds), and a run's start,
    # each report and its end wait for a poll: most of a short 2-worker trial's time
    # (bench/startup_probe.py; docs/benchmarks.md). A poll is one small actor call per worker.
    # Ray Train passes it on from the trial's process to its controller.
    TRAIN_POLL: "0.1",
    # A stopped trial's thread ends at its report; a reused actor waits this long for it (Tune: 2 s).
    TUNE_FUNCTION_THREAD_TIMEOUT_S: "30",
    # Ray starts its workers at nice 15 so that its own processes come first. A trial's ranks are
    # workers: each wake of the raylet, the dashboard or the driver took a core from a CPU rank and
    # stalled the threads of its parallel region. Each worker reads it as it starts, so on any
    # cluster the sweep's workers run at nice 0, as torchrun's processes do.
    WORKER_NICENESS: "0",
}

# In the driver alone, whatever was there.
DRIVER = {
    # No Tune CSV and TensorBoard loggers: a second and third copy of result.json (ResultLog),
    # written by the driver on Tune's loop, and the TensorBoard one kept every ended trial's
    # writer in memory. Runs are read with `raysweep show/report` and W&B.
    TUNE_DISABLE_AUTO_CALLBACK_LOGGERS: "1",
    # A W&B-style function or script that never logs the metric ends with one report of what it
    # did log, as its W&B run does; Tune would stop the sweep at a result without the metric.
    # raysweep checks a train loop's reports itself (trial/metrics.py).
    TUNE_DISABLE_STRICT_METRIC_CHECKING: "1",
}


# In the GCS and raylets of a Ray that raysweep starts (the embedded one, which inherits the
# driver's environment, and each node of `raysweep slurm`'s); a value already set wins. Ray
# retries a waiting placement group after a back-off of up to a second, so a trial started ahead
# of its slots (trial/slots.py) took them up to a second after they freed, every slot idle
# meanwhile. With the retry settings, the scheduler runs that ``slots.release`` nudges grant it in
# 0.09 s (median; 0.26 s with the nudges alone, 0.28 s with neither). The GCS learns that the slots
# are free from the raylet's next resource report, every 100 ms by Ray's default: at 20 ms the
# grant takes 0.03 s (``bench.handoff``, docs/benchmarks.md). A raylet sends only what changed, but
# its and the GCS's timers wake more often: ~45 wakes a second more of an idle embedded Ray's ~910.
STARTED_RAY = {PG_RETRY_MIN: "10", PG_RETRY_MAX: "50", RESOURCE_REPORT: "20"}


def apply() -> dict[str, str]:
    """Set the settings in this, the driver's, process; returns the workers' share as set here."""
    for key, value in (DEFAULTS | STARTED_RAY).items():
        os.environ.setdefault(key, value)
    os.environ.update(DRIVER)
    return {key: os.environ[key] for key in DEFAULTS}


_USERS_PENDING_TRIALS = os.environ.get(PENDING_TRIALS)  # read before raysweep sets it: the user's choice stands


def pending_trials(limit: int | None) -> None:
    """How many trials Tune keeps pending, each with its placement group staged, for this sweep
    (None: Tune's own rule). Tune makes a new trial only while fewer are pending, so the limit is
    also how far ahead of the running trials it asks the search. Set per sweep: a process's next
    sweep does not inherit it."""
    if _USERS_PENDING_TRIALS is not None:
        return
    if limit is None:
        os.environ.pop(PENDING_TRIALS, None)
    else:
        os.environ[PENDING_TRIALS] = str(limit)
