"""Atomic, checksummed checkpoints and the RNG state they carry.

File layout of ``ckpt-<step>.pt`` (one file, so a write is atomic as a whole)::

    b"POLYCKP1"            8 bytes   magic / format version
    sha256(payload)       32 bytes   digest of the payload bytes
    len(payload)           8 bytes   little-endian unsigned
    payload                          torch.save() of a dict of tensors and plain values

A write goes to a temporary file in the same directory, is flushed and ``fsync``-ed, then
``os.replace``-d over the final name (atomic on POSIX) and the directory is ``fsync``-ed. A read
checks the magic, the length and the digest before unpickling with ``weights_only=True``; any
mismatch raises :class:`CheckpointCorruptError`. :class:`CheckpointStore` keeps the newest
``keep`` checkpoints (2 by default) so a corrupt newest one can fall back to the previous one.
"""
from __future__ import annotations

import hashlib
import io
import os
import random
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policyopt.errors import InputError, PolicyOptError

__all__ = [
    "CheckpointError",
    "CheckpointCorruptError",
    "CheckpointStore",
    "LoadedCheckpoint",
    "write_checkpoint",
    "read_checkpoint",
    "capture_rng_state",
    "restore_rng_state",
]

MAGIC = b"POLYCKP1"
_HEADER = struct.Struct("<8s32sQ")
_NAME = re.compile(r"^ckpt-(\d{12})\.pt$")


class CheckpointError(PolicyOptError):
    """A checkpoint could not be written or read."""


class CheckpointCorruptError(CheckpointError):
    """A checkpoint file failed verification (truncated, wrong magic, digest mismatch, unreadable)."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"corrupt checkpoint {self.path}: {problem}")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_checkpoint(path: Path | str, payload: dict[str, Any]) -> int:
    """Serialize ``payload`` and write it atomically with its sha256; returns the file size in bytes."""
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    data = buffer.getvalue()
    header = _HEADER.pack(MAGIC, hashlib.sha256(data).digest(), len(data))
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(header)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)
    return _HEADER.size + len(data)


def read_checkpoint(path: Path | str) -> dict[str, Any]:
    """Read and verify a checkpoint; raises :class:`CheckpointCorruptError` on any mismatch."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CheckpointCorruptError(path, f"unreadable ({exc.strerror})") from exc
    if len(raw) < _HEADER.size:
        raise CheckpointCorruptError(path, f"truncated header ({len(raw)} bytes)")
    magic, digest, length = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise CheckpointCorruptError(path, f"bad magic {magic!r}")
    data = raw[_HEADER.size:]
    if len(data) != length:
        raise CheckpointCorruptError(path, f"payload is {len(data)} bytes, header says {length}")
    if hashlib.sha256(data).digest() != digest:
        raise CheckpointCorruptError(path, "sha256 mismatch")
    try:
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # a verified digest makes this unlikely; keep the error typed anyway
        raise CheckpointCorruptError(path, f"payload does not unpickle: {exc}") from exc
    if not isinstance(payload, dict):
        raise CheckpointCorruptError(path, f"payload is {type(payload).__name__}, expected dict")
    return payload


@dataclass
class LoadedCheckpoint:
    """A verified checkpoint and the corrupt newer ones skipped on the way (path, problem)."""

    path: Path
    step: int
    payload: dict[str, Any]
    skipped: list[tuple[Path, str]] = field(default_factory=list)


class CheckpointStore:
    """The checkpoints of one job in one directory: ``ckpt-<12-digit step>.pt``, newest ``keep`` kept."""

    def __init__(self, directory: Path | str, keep: int = 2) -> None:
        if keep < 1:
            raise InputError("keep", keep, "must keep at least one checkpoint")
        self.directory = Path(directory)
        self.keep = keep

    def path_for(self, step: int) -> Path:
        if step < 0:
            raise InputError("step", step, "must be >= 0")
        return self.directory / f"ckpt-{step:012d}.pt"

    def list(self) -> list[tuple[int, Path]]:
        """``(step, path)`` of every checkpoint file, newest (highest step) first."""
        if not self.directory.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.directory.iterdir() if (m := _NAME.match(p.name))]
        return sorted(found, reverse=True)

    def save(self, step: int, payload: dict[str, Any]) -> Path:
        """Write ``ckpt-<step>.pt`` atomically, then delete all but the newest ``keep``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_for(step)
        write_checkpoint(path, payload)
        for _, old in self.list()[self.keep:]:
            old.unlink(missing_ok=True)
        return path

    def load_latest(self, fallback: bool = True, quarantine: bool = True) -> LoadedCheckpoint | None:
        """The newest checkpoint that verifies, or ``None`` when the directory has none at all.

        A corrupt file is renamed ``*.corrupt`` (when ``quarantine``) and, when ``fallback``, the
        next older one is tried. Raises :class:`CheckpointCorruptError` when ``fallback`` is off and
        the newest is corrupt, or when every checkpoint is corrupt (progress must not silently
        restart from zero).
        """
        skipped: list[tuple[Path, str]] = []
        for step, path in self.list():
            try:
                payload = read_checkpoint(path)
            except CheckpointCorruptError as exc:
                skipped.append((path, exc.problem))
                if quarantine:
                    os.replace(path, path.with_name(path.name + ".corrupt"))
                if not fallback:
                    raise
                continue
            return LoadedCheckpoint(path, step, payload, skipped)
        if skipped:
            raise CheckpointCorruptError(skipped[0][0], "no valid checkpoint left: " + "; ".join(
                f"{p.name}: {why}" for p, why in skipped))
        return None


# --------------------------------------------------------------------------------------------
# RNG state (only plain types and tensors, so checkpoints load with weights_only=True)


def capture_rng_state() -> dict[str, Any]:
    """torch (CPU and every initialized CUDA device), numpy's global and Python's ``random`` states."""
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": str(kind), "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
                  "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
        "python": _python_state_to_plain(random.getstate()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state((np_state["kind"], np_state["keys"].numpy().astype(np.uint32), np_state["pos"],
                         np_state["has_gauss"], np_state["cached_gaussian"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_state_to_plain(value: tuple[Any, ...]) -> list[Any]:
    version, internal, gauss = value
    return [int(version), list(internal), gauss]
