"""Read a ``.wandb`` transaction log back into ``wandb.proto`` Records, as ``wandb sync`` does.

wandb writes records in the LevelDB log format (a 7-byte ":W&B" header, 32 KiB blocks, each chunk with a
CRC-32C, a length and a FULL/FIRST/MIDDLE/LAST type). wandb >= 0.18 reads it in its Go core only, so the
tests read it with this transcription of that format and parse each record with wandb's own protobuf class.
"""

from __future__ import annotations

import struct
from pathlib import Path

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
HEADER = struct.Struct("<IHB")  # crc32c, length, chunk type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[wandb_internal_pb2.Record]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"not a W&B log: {data[:7]!r}"
    pos, out, parts = 7, [], []
    while pos + HEADER.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER.size:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = HEADER.unpack_from(data, pos)
        if pos + HEADER.size + length > len(data):  # a chunk still being written (a run that trains)
            break
        chunk = data[pos + HEADER.size: pos + HEADER.size + length]
        pos += HEADER.size + length
        if kind == 0 and length == 0:
            continue
        parts.append(chunk)
        if kind in (FULL, LAST):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(b"".join(parts))
            out.append(rec)
            parts = []
    return out


def read_run(run_dir: Path, finished: bool = True, timeout_s: float = 60.0) -> dict:
    """What an offline run holds: its run record, history rows, final summary, config and saved files.

    ``finished``: wait until wandb's service wrote the run's exit record (it writes the file behind
    ``run.finish()``'s back); False reads what a run still training has written so far.
    """
    import json
    import time

    (path,) = list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    end = time.monotonic() + timeout_s
    while finished and time.monotonic() < end and not any(r.WhichOneof("record_type") == "exit"
                                                          for r in records(path)):
        time.sleep(0.2)

    out: dict = {"run": None, "history": [], "summary": {}, "config": {}, "files": []}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run"] = rec.run
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
        elif kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            out["summary"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                   for i in rec.summary.update})
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "files":
            out["files"] += [f.path for f in rec.files.files]
    return out
