"""Ray settings raysweep needs in the driver and in every trial process, set on import (a value
already in the environment wins)."""

import os

# Tune's own console tables would bury raysweep's one-line status; our monitor prints instead.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
# Ray Train's controller polls its workers every 2 s by default, and a run's start, each report
# and its end wait for a poll: 8-9 s of every 2-worker trial here (bench/startup_probe.py:
# 21.1 s a trivial trial at 2 s, 14.2 at 0.5, 13.5 at 0.25, 12.5 at 0.1). A poll is one small
# actor call per worker. Set in every trial process (Ray Train passes it on to its controller).
TRAIN_POLL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
os.environ.setdefault(TRAIN_POLL_ENV, "0.1")
