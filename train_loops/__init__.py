"""Example train loops: each a flat ``train(config: dict)`` that raysweep sweeps run."""
