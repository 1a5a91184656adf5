"""The sweep engine: Ray Tune runs the trials, Ray Train runs each trial's DDP workers."""

import os

# Tune's own console tables would bury raysweep's one-line status; our monitor prints instead.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
