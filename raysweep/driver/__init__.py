"""The driver: starts or joins Ray, builds the Tune experiment from the spec, records and shows
the sweep (``sweep.py`` is the entry). Trials themselves run in ``raysweep.trial``."""
