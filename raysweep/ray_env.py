"""Ray settings raysweep needs in the driver and in every trial process, set on import (a value
already in the environment wins)."""

import os

# Tune's own console tables would bury raysweep's one-line status; our monitor prints instead.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
# Ray Train's controller polls its workers (by default every few seconds), and a run's start,
# each report and its end wait for a poll: most of a short 2-worker trial's time
# (bench/startup_probe.py; docs/benchmarks.md). A poll is one small actor call per worker. Set
# in every trial process (Ray Train passes it on to its controller).
TRAIN_POLL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
os.environ.setdefault(TRAIN_POLL_ENV, "0.1")
