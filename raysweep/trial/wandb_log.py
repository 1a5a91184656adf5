"""What a trial reports of what its script or W&B-style function logs with ``wandb.log``: the
plain numbers of each dict, and the reports they make. Standard library only:
``program_hook/sitecustomize.py`` loads this file by path."""


def item(value):
    """``value`` as a plain Python value: a 0-d tensor or array becomes its number (``.item()``,
    which raises for one that has none)."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    return value


def numbers(data):
    """Numbers and 0-d tensors/arrays; images, tables, histograms and booleans are skipped.
    NaN stays NaN: the trial fails on it with a sentence."""
    out = {}
    for key, value in data.items():
        try:
            value = item(value)
        except (TypeError, ValueError, RuntimeError):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out[str(key)] = value
    return out


class LoggedReports:
    """``wandb.log`` calls as a rank's reports, the same for a script and a W&B-style function:
    each call that logs the sweep's metric (any call, in a sweep without one) is one report,
    holding the latest value of every key logged so far."""

    def __init__(self, metric):
        self.metric = metric
        self.latest = {}
        self.count = 0

    def add(self, logged):
        """The report this call's numbers make, or None."""
        self.latest.update(logged)
        if logged and (self.metric is None or self.metric in logged):
            self.count += 1
            return dict(self.latest)
        return None
