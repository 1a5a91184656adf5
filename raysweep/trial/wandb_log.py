"""The plain numbers of a ``wandb.log`` dict: what a trial reports of what its script or W&B-style
function logged. Standard library only: ``program_hook/sitecustomize.py`` loads this file by path."""


def numbers(data):
    """Numbers and 0-d tensors/arrays; images, tables, histograms and booleans are skipped.
    NaN stays NaN: the trial fails on it with a sentence."""
    out = {}
    for key, value in data.items():
        if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
            try:
                value = value.item()
            except (TypeError, ValueError, RuntimeError):
                continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out[str(key)] = value
    return out
