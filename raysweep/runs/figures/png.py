"""The report's figures as PNG files (``report --png``), rendered by kaleido in a local Chromium."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from raysweep.errors import UserError

RENDER_TIMEOUT_S = 300  # a figure's render; kaleido's own 90 s was passed on a loaded 2-core CI machine


def write_pngs(figs: dict[str, Any], png_dir: Path) -> list[Path]:
    """Each figure as ``png_dir/<name>.png`` (kaleido, which needs Chrome or Chromium).

    kaleido itself, not plotly's ``write_images``: that one drops the errors kaleido returns, so a
    render that failed or timed out left no file and ``--png`` still succeeded. A figure that fails
    is rendered once more (the browser's tab may have crashed); one that fails again is an error
    naming it."""
    import kaleido

    png_dir.mkdir(parents=True, exist_ok=True)
    specs = {
        name: {
            "fig": fig,
            "path": png_dir / f"{name}.png",
            "opts": {"format": "png", "width": 1100, "height": fig.layout.height or 500},
        }
        for name, fig in figs.items()
    }
    errors: tuple[BaseException, ...] = ()
    todo = list(specs)
    for _ in range(2):
        try:
            errors = kaleido.write_fig_from_object_sync([specs[n] for n in todo], kopts={"timeout": RENDER_TIMEOUT_S})
        except Exception as e:  # kaleido raises its own types, and RuntimeError/OSError from the browser
            errors = (e,)
        todo = [n for n in todo if not _is_png(specs[n]["path"])]
        if not todo:
            return [spec["path"] for spec in specs.values()]
    why = f"{type(errors[0]).__name__}: {_first_line(errors[0])}" if errors else "no error reported"
    raise UserError(
        f"--png: could not export PNGs of {', '.join(todo)} with kaleido ({why}). "
        "kaleido drives a local Chrome or Chromium: install one (Debian: `apt-get install chromium`) "
        "or point BROWSER_PATH at it. The HTML report was written."
    )


def _is_png(path: Path) -> bool:
    with contextlib.suppress(OSError):
        with path.open("rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else "no message"
