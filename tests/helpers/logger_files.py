# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""What the Trainer's loggers wrote, read back from their files: TensorBoard's event files and a W&B offline run's
transaction log, as ``{key: [(step, value), ...]}``."""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from pathlib import Path

#: A W&B run file: a 7-byte header (":W&B", magic, version), then LevelDB's log format: 32 KiB blocks of chunks,
#: each a 7-byte header (CRC32C, little-endian length, type: 1 whole, 2 first, 3 middle, 4 last) and its bytes.
WANDB_HEADER, BLOCK, CHUNK_HEADER = 7, 32768, 7


def tensorboard_scalars(root: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the one TensorBoard log folder under `root`, by tag, in the order written."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (log_dir,) = {path.parent for path in root.rglob("events.out.tfevents.*")}
    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})  # 0: keep every event
    events.Reload()
    return {tag: [(event.step, event.value) for event in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _wandb_records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    records, payload, position = [], b"", WANDB_HEADER
    while position + CHUNK_HEADER <= len(data):
        if BLOCK - position % BLOCK < CHUNK_HEADER:  # a block's tail too short for a chunk is padding
            position += BLOCK - position % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + CHUNK_HEADER])
        if kind == 0:  # zeros: padding to the end of the block
            position += BLOCK - position % BLOCK
            continue
        payload += data[position + CHUNK_HEADER : position + CHUNK_HEADER + length]
        position += CHUNK_HEADER + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            records.append(record)
            payload = b""
    return records


def wandb_history(run_dir: Path, *, step_key: str = "train/global_step") -> dict[str, list[tuple[int, float]]]:
    """Every history value of the W&B offline run in `run_dir` (its ``run-*.wandb``), by key, at `step_key`."""
    (path,) = run_dir.glob("run-*.wandb")
    history: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for record in _wandb_records(path):
        if record.WhichOneof("record_type") != "history":
            continue
        items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
        for key, value in items.items():
            if not key.startswith("_") and key != step_key:
                history[key].append((items[step_key], value))
    return dict(history)
