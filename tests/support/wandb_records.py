"""Read a W&B offline run file (``run-*.wandb``) back, to check what raysweep logged.

wandb no longer ships a reader; the format is a LevelDB-style log of protobuf ``Record``s:
a 7-byte file header, then 32 KiB blocks of (crc32 u32, length u16, type u8, data) chunks.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    out, pos, pending = [], HEADER, b""
    while pos + HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < HEADER:  # block trailer padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pending)
            out.append(record)
    return out


def run_contents(path: Path) -> dict[str, Any]:
    """History rows, config, summary updates, run identity and exit code of one offline run."""
    history, config, summary, run, exit_code = [], {}, {}, {}, None
    for r in records(path):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            history.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
        elif kind == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update})
        elif kind == "config":
            config.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.config.update})
        elif kind == "exit":
            exit_code = r.exit.exit_code
        elif kind == "run":  # the config given to wandb.init travels inside the run record
            run = {"id": r.run.run_id, "group": r.run.run_group, "project": r.run.project, "sweep_id": r.run.sweep_id}
            run["tags"] = list(r.run.tags)
            config.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.run.config.update})
    return {"history": history, "config": config, "summary": summary, "run": run, "exit_code": exit_code}
