"""Where a sweep's run dir lives when ``--storage`` is a URI (``s3://bucket/prefix``,
``gs://...``, any filesystem pyarrow opens), and the local copy of it that the driver and the
readers work in.

The storage is the truth: the driver writes the run dir in a local copy
(``RAYSWEEP_CACHE_DIR``, by default ``~/.cache/raysweep``) and pushes what changed; Tune writes
its own state and every checkpoint there itself, from the node that made it; ``show``,
``report``, ``load``, ``publish``, ``--warm-start`` and ``resume`` pull the run dir (all but its
checkpoints) into the local copy before they read it. A plain path is used as it is, as before.

Credentials come from the environment, as pyarrow and boto read them (``AWS_ACCESS_KEY_ID``,
``AWS_PROFILE``, an instance's role): a URI that carries any is refused, so none reaches a
file, a log or a message.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from raysweep.env import CACHE_DIR
from raysweep.errors import UserError

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
_SECRET_KEYS = {"access_key", "secret_key", "session_token"}  # pyarrow's S3 URI options that are credentials
# Tune's and Ray Train's checkpoint dirs: a reader needs none of them, so a pull leaves them on storage
_CHECKPOINT_DIR = re.compile(r"^checkpoint_\d+$")
_NOT_PULLED = ("train_runs",)
# What Tune writes and syncs to the storage itself: the driver's push leaves it alone, so a copy a
# reader pulled is never pushed back over Tune's newer one
_TUNE_OWNED = re.compile(
    r"^(\.validate_storage_marker|tuner\.pkl|(experiment_state|searcher-state|search_gen_state|basic-variant-state)-.*"
    r"|[^/]+/(result\.json|params\.json|params\.pkl|progress\.csv))$"
)
MARKER = ".raysweep_storage_check"  # written once to check the storage is writable (and by every node)


def is_uri(text: str | os.PathLike) -> bool:
    return isinstance(text, str) and _SCHEME.match(text) is not None and not text.startswith("file://")


def join(where: str, *parts: str) -> str:
    """``parts`` appended to the path of a URI (its query options kept) or a local path."""
    head, sep, query = where.partition("?")
    return "/".join([head.rstrip("/"), *parts]) + sep + query


@dataclass(frozen=True)
class Remote:
    """A directory on a filesystem pyarrow opens, named by its URI (query options kept)."""

    uri: str

    def join(self, *parts: str) -> Remote:
        return Remote(join(self.uri, *parts))

    @property
    def name(self) -> str:
        return PurePosixPath(urlsplit(self.uri).path).name or urlsplit(self.uri).netloc

    def open(self) -> tuple[Any, str]:
        """(pyarrow filesystem, this directory's path on it)."""
        import pyarrow.fs

        return pyarrow.fs.FileSystem.from_uri(self.uri)

    def __str__(self) -> str:
        return self.uri


def parse(text: str, flag: str = "--storage") -> Remote:
    """``text`` as a storage URI, refused in one sentence if pyarrow knows no such filesystem or it carries credentials."""
    import pyarrow

    parts = urlsplit(text)
    scheme = parts.scheme
    if parts.username or parts.password or _SECRET_KEYS & {k for k, _ in parse_qsl(parts.query)}:
        raise UserError(
            f"{flag} {scheme}://{parts.hostname or ''}{parts.path}: the URI carries credentials, which would be kept "
            "in the run dir and printed; set them in the environment instead (AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, GOOGLE_APPLICATION_CREDENTIALS), where pyarrow reads them"
        )
    try:
        Remote(text).open()
    except pyarrow.ArrowInvalid as e:
        if "Unrecognized filesystem type" in str(e):
            raise UserError(
                f"{flag} {text}: pyarrow opens no filesystem '{scheme}://'; use s3:// (with "
                "?endpoint_override=host:port for an S3-compatible server), gs://, abfs://, hdfs:// or a path"
            ) from None
        raise UserError(f"{flag} {text}: {e}") from None
    except (ImportError, OSError) as e:
        raise UserError(f"{flag} {text}: {e}") from None
    return Remote(text)


def check_writable(remote: Remote, flag: str = "--storage") -> None:
    """Write and remove a marker under ``remote``: a missing bucket, no credentials or an
    unreachable endpoint is one sentence, before anything of the sweep is written."""
    fs, path = remote.open()
    marker = f"{path.rstrip('/')}/{MARKER}"
    try:
        fs.create_dir(path)
        with fs.open_output_stream(marker) as f:
            f.write(b"raysweep")
        fs.delete_file(marker)
    except OSError as e:
        raise UserError(f"{flag} {remote}: {_why(str(e))}") from None


def _why(error: str) -> str:
    """pyarrow's error, said as what to fix."""
    if "NETWORK_CONNECTION" in error or "Could not connect" in error or "Couldn't resolve" in error:
        return "its endpoint does not answer; check endpoint_override (host:port) and that the server is up"
    bucket = re.search(r"Bucket '([^']+)' not found", error)
    if bucket:
        return f"its bucket {bucket.group(1)!r} does not exist; create it first (raysweep creates no bucket)"
    if "ACCESS_DENIED" in error or "AccessDenied" in error or "InvalidAccessKeyId" in error or "403" in error:
        return (
            "access denied writing to it: no credentials, or credentials without write access (pyarrow reads "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or the machine's role)"
        )
    return error.splitlines()[0] if error else "it cannot be written"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_DIR) or Path.home() / ".cache" / "raysweep").expanduser()


def local_copy(run: Remote) -> Path:
    """The local copy of the run dir at ``run``: one dir per URI, named after the sweep."""
    digest = hashlib.sha256(run.uri.encode()).hexdigest()[:12]
    return cache_root() / "runs" / digest / run.name


def _files(fs: Any, path: str) -> list[Any]:
    import pyarrow.fs

    info = fs.get_file_info(path)
    if info.type != pyarrow.fs.FileType.Directory:
        return []
    return [f for f in fs.get_file_info(pyarrow.fs.FileSelector(path, recursive=True)) if f.is_file]


def read_text(fs: Any, path: str) -> str:
    """A file's text on ``fs`` ("" where there is none)."""
    try:
        with fs.open_input_stream(path) as f:
            return f.read().decode()
    except (FileNotFoundError, OSError):
        return ""


def exists(run: Remote, relative: str) -> bool:
    import pyarrow.fs

    fs, path = run.open()
    return fs.get_file_info(f"{path.rstrip('/')}/{relative}").type == pyarrow.fs.FileType.File


def pull(run: Remote, local: Path) -> Path:
    """Copy the run dir at ``run`` into ``local`` (all but checkpoints), replacing what was there."""
    fs, path = run.open()
    root = path.rstrip("/")
    for info in _files(fs, root):
        relative = info.path[len(root) + 1 :]
        parts = relative.split("/")
        if any(_CHECKPOINT_DIR.match(p) for p in parts[:-1]) or parts[0] in _NOT_PULLED:
            continue
        target = local / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(info.path) as src, open(target, "wb") as dst:
            dst.write(src.read())
    return local


class Pusher:
    """Uploads what changed in a local run dir since the last push (by size and mtime)."""

    def __init__(self, local: Path, run: Remote, skip: frozenset[str] = frozenset({"driver.lock"})):
        self.local, self.run, self.skip = Path(local), run, skip
        self._sent: dict[str, tuple[int, int]] = {}

    def push(self) -> int:
        """Upload the changed files; returns how many."""
        fs, path = self.run.open()
        root = path.rstrip("/")
        sent = 0
        for file in sorted(p for p in self.local.rglob("*") if p.is_file() and not p.is_symlink()):
            relative = file.relative_to(self.local).as_posix()
            if relative in self.skip or relative.endswith(".tmp") or _TUNE_OWNED.match(relative):
                continue
            try:
                stat = file.stat()
            except FileNotFoundError:  # removed since the listing (a file replaced atomically)
                continue
            stamp = (stat.st_size, stat.st_mtime_ns)
            if self._sent.get(relative) == stamp:
                continue
            fs.create_dir(f"{root}/{PurePosixPath(relative).parent}".rstrip("/."))
            with open(file, "rb") as src, fs.open_output_stream(f"{root}/{relative}") as dst:
                dst.write(src.read())
            self._sent[relative] = stamp
            sent += 1
        return sent


@dataclass(frozen=True)
class Usage:
    """What a run dir holds on its storage."""

    bytes: int
    checkpoints: int  # checkpoint dirs (Tune's and Ray Train's)
    checkpoint_bytes: int

    def to_json(self) -> dict[str, int]:
        return {"bytes": self.bytes, "checkpoints": self.checkpoints, "checkpoint_bytes": self.checkpoint_bytes}

    def text(self) -> str:
        return f"{_size(self.bytes)} held, {_size(self.checkpoint_bytes)} of it in {self.checkpoints} checkpoint(s)"


def _size(count: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.3g} {unit}" if unit != "B" else f"{count} B"
        count /= 1000
    return f"{count:.3g} TB"


def usage(fs: Any, path: str) -> Usage:
    """Bytes under ``path`` on ``fs``, and those in checkpoint dirs."""
    root = path.rstrip("/")
    total = in_checkpoints = 0
    dirs: set[str] = set()
    for info in _files(fs, root):
        total += info.size or 0
        parts = info.path[len(root) + 1 :].split("/")[:-1]
        at = next((i for i, p in enumerate(parts) if _CHECKPOINT_DIR.match(p)), None)
        if at is not None:
            in_checkpoints += info.size or 0
            dirs.add("/".join(parts[: at + 1]))
    return Usage(total, len(dirs), in_checkpoints)


def remove(run: Remote) -> None:
    """Delete the dir at ``run`` and all it holds (a sweep that refused to start)."""
    fs, path = run.open()
    try:
        fs.delete_dir(path)
    except (FileNotFoundError, OSError):
        pass


def fetch(run: Remote) -> Path:
    """The run dir at ``run``, pulled into its local copy; refused in one sentence if there is none."""
    try:
        found = exists(run, "spec.json")
    except OSError as e:
        raise UserError(f"{run}: {_why(str(e))}") from None
    if not found:
        raise UserError(f"no sweep found at {run} (looked for its spec.json)")
    return pull(run, local_copy(run))


def remote_run(run: str | os.PathLike, storage: str | os.PathLike) -> Remote | None:
    """The URI of the run dir ``run`` names (itself a URI, or a name under a URI ``storage``); None for a local one."""
    if is_uri(str(run)):
        return parse(str(run), "the run dir")
    if is_uri(str(storage)) and not Path(run).is_dir():
        return parse(str(storage)).join(str(run))
    return None


def stored_at(run_dir: Path) -> Remote | None:
    """The URI of the run dir ``run_dir`` is the local copy of (its run.json names the storage); None for another."""
    import json

    try:
        uri = json.loads((Path(run_dir) / "run.json").read_text()).get("storage")
    except (OSError, ValueError, AttributeError):
        return None
    return Remote(uri).join(Path(run_dir).name) if uri else None


def push_back(run_dir: Path) -> None:
    """What a reader wrote in a local copy (``publish``: the W&B sweep's file), pushed to its storage."""
    run = stored_at(run_dir)
    if run is not None:
        Pusher(run_dir, run).push()


def held(run_dir: Path) -> Usage:
    """What the sweep of ``run_dir`` holds on its storage (a URI's, where its run.json names one)."""
    run = stored_at(run_dir)
    return usage(*open_path(run.uri if run is not None else str(run_dir)))


def open_path(where: str | os.PathLike) -> tuple[Any, str]:
    """(filesystem, path) for a URI or a local path."""
    if is_uri(str(where)):
        return Remote(str(where)).open()
    import pyarrow.fs

    return pyarrow.fs.LocalFileSystem(), str(Path(where).resolve())
