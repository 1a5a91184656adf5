"""How a sweep picks configurations and stops trials: Tune searchers, schedulers and stoppers
built from the spec. Runs on the driver, inside Tune's loop."""
