"""The narrow job API: leases, automatic checkpoint/resume and progress records.

A user's training script needs three lines::

    with TrainingSession(job_id, ckpt_dir, model, optimizer, lease=Lease.for_seconds(60)) as s:
        for batch in s.wrap(batches):          # stops at lease end / step budget
            loss = train_step(batch); s.report(loss.item())

Semantics
---------
* **Resume.** Entering the session loads the newest checkpoint that verifies (model, optimizer,
  optional LR scheduler, step, torch/CUDA/numpy/``random`` RNG states, the data iterator position
  and the loss history). A corrupt newest checkpoint is quarantined (``*.corrupt``) and the previous
  one is used (``on_corrupt="fallback"``, the default) or :class:`CheckpointCorruptError` is raised
  (``on_corrupt="raise"``).
* **Steps.** A step is counted when the loop body returns control to ``wrap`` (i.e. after the
  optimizer step). ``wrap`` checks before fetching each batch whether the job must stop:
  ``step >= steps_total`` (``completed``), the lease's deadline (``time.time() >= deadline``) or its
  step limit (``step - lease_start_step >= steps_limit``) (``lease_ended``), or
  :meth:`TrainingSession.request_stop` (``stopped``, e.g. from a SIGTERM handler).
* **Lease renewal.** When a lease ends and ``keep_workers`` is true, the session waits up to
  ``renewal_wait_s`` for a new lease (from :meth:`renew` or a new ``lease_id`` in ``lease_file``)
  and carries on in the same process without checkpointing. Otherwise (and when no renewal comes)
  the loop ends and leaving the ``with`` block writes a checkpoint — so a checkpoint is saved when the
  lease ends and the job does not keep its workers, and when the job completes.
* **Data position.** An iterable with ``state_dict()``/``load_state_dict()`` (like
  :class:`policyopt.jobs.data.BatchStream`) has its state saved and restored; any other iterable is
  fast-forwarded by the number of batches consumed so far (it must then be deterministic).
* **Progress.** A JSON record (see :meth:`TrainingSession.progress`) is written atomically to
  ``progress_file`` every ``progress_interval_s`` while running and once at the end.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, Literal, TypeVar

import torch
from torch import nn

from policyopt.errors import InputError

from .checkpoint import CheckpointStore, LoadedCheckpoint, capture_rng_state, restore_rng_state

__all__ = ["Lease", "TrainingSession", "write_json_atomic", "LOSS_WINDOW"]

T = TypeVar("T")
LOSS_WINDOW = 10  # initial_loss / final_loss are means over this many losses
CHECKPOINT_FORMAT = 1


def write_json_atomic(path: Path | str, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON to a temporary file then ``os.replace`` it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    os.replace(tmp, path)


@dataclass(frozen=True)
class Lease:
    """Permission to train until ``deadline`` (a ``time.time()`` value) or for ``steps_limit`` steps.

    ``keep_workers``: the job keeps its workers next round, so at lease end it waits for a renewal
    instead of checkpointing and exiting. ``lease_id`` identifies a lease; a lease file whose
    ``lease_id`` changes is a renewal.
    """

    deadline: float | None = None
    steps_limit: int | None = None
    keep_workers: bool = False
    lease_id: int = 0

    def __post_init__(self) -> None:
        if self.deadline is not None and not math.isfinite(self.deadline):
            raise InputError("lease.deadline", self.deadline, "must be a finite time.time() value or null")
        if self.steps_limit is not None and (not isinstance(self.steps_limit, int) or self.steps_limit < 0):
            raise InputError("lease.steps_limit", self.steps_limit, "must be a non-negative integer or null")

    @classmethod
    def for_seconds(cls, seconds: float, steps_limit: int | None = None, keep_workers: bool = False,
                    lease_id: int = 0) -> "Lease":
        """A lease ending ``seconds`` from now."""
        if not (seconds >= 0 and math.isfinite(seconds)):
            raise InputError("lease.seconds", seconds, "must be a finite non-negative number")
        return cls(time.time() + seconds, steps_limit, keep_workers, lease_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, field: str = "lease") -> "Lease":
        if not isinstance(data, dict):
            raise InputError(field, data, "must be a JSON object")
        unknown = set(data) - {"deadline", "steps_limit", "keep_workers", "lease_id"}
        if unknown:
            raise InputError(f"{field}.{sorted(unknown)[0]}", data[sorted(unknown)[0]], "unknown lease field")
        deadline = data.get("deadline")
        if deadline is not None and not isinstance(deadline, (int, float)):
            raise InputError(f"{field}.deadline", deadline, "must be a number or null")
        keep = data.get("keep_workers", False)
        if not isinstance(keep, bool):
            raise InputError(f"{field}.keep_workers", keep, "must be true or false")
        lease_id = data.get("lease_id", 0)
        if not isinstance(lease_id, int) or isinstance(lease_id, bool):
            raise InputError(f"{field}.lease_id", lease_id, "must be an integer")
        return cls(None if deadline is None else float(deadline), data.get("steps_limit"), keep, lease_id)

    def write(self, path: Path | str) -> None:
        """Write atomically (the executor's way of renewing or ending a running job's lease)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def read(cls, path: Path | str) -> "Lease":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError("lease_file", str(path), f"cannot read lease JSON: {exc}") from exc
        return cls.from_dict(data, field=f"lease_file({path})")


def _unwrap(model: nn.Module) -> nn.Module:
    """The module inside a DistributedDataParallel/DataParallel wrapper (checkpoints hold the bare one)."""
    inner = getattr(model, "module", None)
    return inner if isinstance(inner, nn.Module) else model


class TrainingSession:
    """One lease (or a chain of renewed leases) of one job's training; see the module docstring.

    ``is_primary`` false (data-parallel ranks > 0): resumes like the primary but never writes
    checkpoints or progress. ``agree(local_stop) -> stop`` makes the stop decision collective (the
    worker passes an all-reduce so all ranks leave the loop at the same step).
    """

    def __init__(
        self,
        job_id: str,
        checkpoint_dir: Path | str,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        lease: Lease | None = None,
        steps_total: int | None = None,
        scheduler: Any | None = None,
        lease_file: Path | str | None = None,
        renewal_wait_s: float = 0.0,
        keep_checkpoints: int = 2,
        checkpoint_interval_s: float | None = None,
        progress_file: Path | str | None = None,
        progress_interval_s: float = 1.0,
        warmup_steps: int = 2,
        on_corrupt: Literal["fallback", "raise"] = "fallback",
        resume: bool = True,
        save: bool = True,
        is_primary: bool = True,
        agree: Callable[[bool], bool] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not job_id or not isinstance(job_id, str):
            raise InputError("job_id", job_id, "must be a non-empty string")
        if steps_total is not None and (not isinstance(steps_total, int) or steps_total < 0):
            raise InputError("steps_total", steps_total, "must be a non-negative integer or None")
        if on_corrupt not in ("fallback", "raise"):
            raise InputError("on_corrupt", on_corrupt, "must be 'fallback' or 'raise'")
        if renewal_wait_s < 0 or warmup_steps < 0 or progress_interval_s <= 0:
            raise InputError("renewal_wait_s/warmup_steps/progress_interval_s",
                             (renewal_wait_s, warmup_steps, progress_interval_s), "must be >= 0 (interval > 0)")
        if checkpoint_interval_s is not None and checkpoint_interval_s <= 0:
            raise InputError("checkpoint_interval_s", checkpoint_interval_s, "must be > 0 or None")
        self.job_id = job_id
        self.store = CheckpointStore(checkpoint_dir, keep=keep_checkpoints)
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.lease = lease if lease is not None else Lease()
        self.steps_total = steps_total
        self.lease_file = Path(lease_file) if lease_file is not None else None
        self.renewal_wait_s = float(renewal_wait_s)
        self.checkpoint_interval_s = checkpoint_interval_s
        self.progress_file = Path(progress_file) if progress_file is not None else None
        self.progress_interval_s = float(progress_interval_s)
        self.warmup_steps = int(warmup_steps)
        self.on_corrupt = on_corrupt
        self.resume_enabled = resume
        self.save_enabled = save
        self.is_primary = is_primary
        self.agree = agree
        self.metadata = metadata if metadata is not None else {}  # live: merged into every progress record
        self.extra: dict[str, Any] = {}  # user state saved in checkpoints (plain values / tensors)

        self.step = 0
        self.session_start_step = 0
        self.lease_start_step = 0
        self.leases_in_session = 1
        self.stop_reason: str | None = None
        self.status = "created"
        self.error: str | None = None
        self.resumed_from: str | None = None
        self.corrupt_checkpoints: list[dict[str, str]] = []
        self.last_checkpoint: str | None = None
        self.checkpoint_seconds = 0.0
        self.resume_seconds = 0.0

        self._stop_requested = threading.Event()
        self._pending_lease: Lease | None = None
        self._lease_lock = threading.Lock()
        self._lease_file_sig: tuple[int, int] | None = None
        self._consumed = 0
        self._pending_data: dict[str, Any] | None = None
        self._data_source: Any = None
        self._iterator: Iterator[Any] | None = None
        self._saved_step: int | None = None
        self._entered = False
        # losses: first LOSS_WINDOW of the job, last LOSS_WINDOW, count, first and last raw values
        self._initial_losses: list[float] = []
        self._recent_losses: deque[float] = deque(maxlen=LOSS_WINDOW)
        self._loss_count = 0
        self._session_first_loss: float | None = None
        # timing (perf_counter seconds)
        self._t_created = time.perf_counter()
        self._t_first: float | None = None
        self._t_last: float | None = None
        self._t_warm: float | None = None
        self._idle_s = 0.0
        self._idle_at_warm = 0.0
        self._t_progress = 0.0
        self._t_checkpoint = time.perf_counter()
        self._train_seconds_before = 0.0

    # ---------------------------------------------------------------- context manager

    def __enter__(self) -> "TrainingSession":
        self._entered = True
        self.status = "running"
        if self.resume_enabled:
            t0 = time.perf_counter()
            loaded = self.store.load_latest(fallback=self.on_corrupt == "fallback", quarantine=self.is_primary)
            if loaded is not None:
                self._apply(loaded)
            self.resume_seconds = time.perf_counter() - t0
        self.session_start_step = self.lease_start_step = self.step
        self._t_checkpoint = time.perf_counter()
        self._maybe_write_progress(force=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc_type is not None:
            self.status = "failed"
            self.error = f"{exc_type.__name__}: {exc}"
            self._maybe_write_progress(force=True)
            return False
        if self.stop_reason is None:
            self.stop_reason = "completed" if self._is_complete() else "stopped"
        if self._saved_step is None or self.step != self._saved_step:
            self.save_checkpoint()  # lease ended without renewal, job completed, or stop requested
        self.status = self.stop_reason
        self._maybe_write_progress(force=True)
        return False

    # ---------------------------------------------------------------- public API

    def wrap(self, iterable: Iterable[T]) -> Iterator[T]:
        """Yield batches from ``iterable`` until the job must stop (see the module docstring)."""
        if not self._entered:
            raise InputError("session", self.job_id, "use 'with TrainingSession(...) as s:' before s.wrap()")
        if iterable is self._data_source and self._iterator is not None:
            iterator = self._iterator  # wrap() again after a renewal: continue where the loop stopped
        else:
            iterator = self._restore_data(iterable)
        self._data_source, self._iterator = iterable, iterator
        while True:
            reason = self._check_stop()
            if reason is not None:
                self.stop_reason = reason
                return
            if self._t_first is None:
                self._t_first = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                self.stop_reason = "data_exhausted"
                return
            self._consumed += 1
            yield batch
            self._step_done()

    def report(self, loss: float) -> None:
        """Record the loss of the step in progress (used for initial/final loss in progress)."""
        value = float(loss)
        if len(self._initial_losses) < LOSS_WINDOW:
            self._initial_losses.append(value)
        self._recent_losses.append(value)
        self._loss_count += 1
        if self._session_first_loss is None:
            self._session_first_loss = value

    def request_stop(self) -> None:
        """Stop at the next step boundary (thread- and signal-handler-safe); the exit saves a checkpoint."""
        self._stop_requested.set()

    def renew(self, lease: Lease) -> None:
        """Replace the lease (takes effect at the next step boundary; thread-safe)."""
        with self._lease_lock:
            self._pending_lease = lease

    def save_checkpoint(self) -> Path | None:
        """Write a checkpoint of the current state now (primary rank only; no-op if saving is off)."""
        if not (self.save_enabled and self.is_primary):
            return None
        t0 = time.perf_counter()
        path = self.store.save(self.step, self._payload())
        self.checkpoint_seconds += time.perf_counter() - t0
        self._saved_step = self.step
        self._t_checkpoint = time.perf_counter()
        self.last_checkpoint = str(path)
        return path

    def progress(self) -> dict[str, Any]:
        """The JSON progress record.

        ``steps_per_s`` = steps this session / training seconds (first batch fetch to last step end,
        minus time idle waiting for a renewal); ``steady_steps_per_s`` excludes the first
        ``warmup_steps`` steps. ``initial_loss``/``final_loss`` are means of the job's first/last
        ``LOSS_WINDOW`` reported losses (kept across checkpoints).
        """
        steps = self.step - self.session_start_step
        train_s = self._train_seconds()
        steady = None
        if self._t_warm is not None and self._t_last is not None:
            warm_steps = steps - self.warmup_steps
            warm_time = self._t_last - self._t_warm - (self._idle_s - self._idle_at_warm)
            if warm_steps > 0 and warm_time > 0:
                steady = warm_steps / warm_time
        record: dict[str, Any] = {
            "job_id": self.job_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "steps_done": self.step,
            "steps_total": self.steps_total,
            "steps_this_session": steps,
            "session_start_step": self.session_start_step,
            "leases_in_session": self.leases_in_session,
            "lease": self.lease.to_dict(),
            "steps_per_s": steps / train_s if train_s > 0 and steps > 0 else None,
            "steady_steps_per_s": steady,
            "train_seconds": train_s,
            "train_seconds_total": self._train_seconds_before + train_s,
            "wall_seconds": time.perf_counter() - self._t_created,
            "resume_seconds": self.resume_seconds,
            "checkpoint_seconds": self.checkpoint_seconds,
            "initial_loss": _mean(self._initial_losses),
            "final_loss": _mean(self._recent_losses),
            "first_loss": self._initial_losses[0] if self._initial_losses else None,
            "last_loss": self._recent_losses[-1] if self._recent_losses else None,
            "session_first_loss": self._session_first_loss,
            "losses_reported": self._loss_count,
            "resumed_from": self.resumed_from,
            "corrupt_checkpoints": list(self.corrupt_checkpoints),
            "checkpoint": self.last_checkpoint,
            "error": self.error,
            "pid": os.getpid(),
            "updated_at": time.time(),
        }
        record.update(self.metadata)
        return record

    # ---------------------------------------------------------------- internals

    def _train_seconds(self) -> float:
        if self._t_first is None or self._t_last is None:
            return 0.0
        return max(0.0, self._t_last - self._t_first - self._idle_s)

    def _is_complete(self) -> bool:
        return self.steps_total is not None and self.step >= self.steps_total

    def _step_done(self) -> None:
        self.step += 1
        now = time.perf_counter()
        self._t_last = now
        if self.step - self.session_start_step == self.warmup_steps:
            self._t_warm, self._idle_at_warm = now, self._idle_s
        if self.warmup_steps == 0 and self._t_warm is None:
            self._t_warm, self._idle_at_warm = self._t_first, 0.0
        if self.checkpoint_interval_s is not None and now - self._t_checkpoint >= self.checkpoint_interval_s:
            self.save_checkpoint()
        self._maybe_write_progress()

    def _maybe_write_progress(self, force: bool = False) -> None:
        if self.progress_file is None or not self.is_primary:
            return
        now = time.perf_counter()
        if force or now - self._t_progress >= self.progress_interval_s:
            self._t_progress = now
            write_json_atomic(self.progress_file, self.progress())

    def _poll_lease(self) -> None:
        """Adopt a renewal from :meth:`renew` or from a changed ``lease_file`` with a new ``lease_id``."""
        with self._lease_lock:
            pending, self._pending_lease = self._pending_lease, None
        if pending is None and self.lease_file is not None:
            try:
                st = self.lease_file.stat()
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_mtime_ns, st.st_size) != self._lease_file_sig:
                self._lease_file_sig = (st.st_mtime_ns, st.st_size)
                candidate = Lease.read(self.lease_file)
                if candidate != self.lease:
                    pending = candidate
        if pending is not None:
            if pending.lease_id != self.lease.lease_id:
                self.lease_start_step = self.step
                self.leases_in_session += 1
            self.lease = pending

    def _lease_over(self) -> bool:
        lease = self.lease
        if lease.deadline is not None and time.time() >= lease.deadline:
            return True
        return lease.steps_limit is not None and self.step - self.lease_start_step >= lease.steps_limit

    def _local_stop_reason(self) -> str | None:
        if self._stop_requested.is_set():
            return "stopped"
        if self._is_complete():
            return "completed"
        self._poll_lease()
        if not self._lease_over():
            return None
        if self.lease.keep_workers and self.renewal_wait_s > 0:
            t0 = time.perf_counter()
            self.status = "waiting"  # visible in the progress file while the executor decides
            self._maybe_write_progress(force=True)
            self.status = "running"
            while time.perf_counter() - t0 < self.renewal_wait_s and not self._stop_requested.is_set():
                time.sleep(0.01)
                self._poll_lease()
                if not self._lease_over():
                    self._idle_s += time.perf_counter() - t0
                    return None
            self._idle_s += time.perf_counter() - t0
        return "stopped" if self._stop_requested.is_set() else "lease_ended"

    def _check_stop(self) -> str | None:
        reason = self._local_stop_reason()
        if self.agree is None:
            return reason
        if self.agree(reason is not None):
            return reason or ("completed" if self._is_complete() else "stopped_by_peer")
        return None

    def _restore_data(self, iterable: Iterable[T]) -> Iterator[T]:
        pending, self._pending_data = self._pending_data, None
        if pending is None:
            return iter(iterable)
        state = pending.get("state")
        if state is not None and hasattr(iterable, "load_state_dict"):
            iterable.load_state_dict(state)
            return iter(iterable)
        # not resumable: fast-forward a deterministic iterable past the batches already consumed
        iterator = iter(iterable)
        skipped = sum(1 for _ in itertools.islice(iterator, int(pending["consumed"])))
        if skipped != int(pending["consumed"]):
            raise InputError("data", skipped, f"iterable ended while skipping {pending['consumed']} consumed batches")
        return iterator

    def _payload(self) -> dict[str, Any]:
        source = self._data_source
        data_state = source.state_dict() if source is not None and hasattr(source, "state_dict") else None
        if data_state is None and self._pending_data is not None:  # saved before wrap(): keep the old state
            data_state = self._pending_data.get("state")
        return {
            "format": CHECKPOINT_FORMAT,
            "job_id": self.job_id,
            "step": self.step,
            "model": _unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None,
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": capture_rng_state(),
            "data": {"consumed": self._consumed, "state": data_state},
            "losses": {"initial": list(self._initial_losses), "recent": list(self._recent_losses),
                       "count": self._loss_count},
            "train_seconds_total": self._train_seconds_before + self._train_seconds(),
            "extra": self.extra,
            "saved_at": time.time(),
        }

    def _apply(self, loaded: LoadedCheckpoint) -> None:
        payload = loaded.payload
        if payload.get("format") != CHECKPOINT_FORMAT:
            raise InputError("checkpoint.format", payload.get("format"),
                             f"expected {CHECKPOINT_FORMAT} in {loaded.path}")
        if payload.get("job_id") != self.job_id:
            raise InputError("checkpoint_dir", str(self.store.directory),
                             f"holds checkpoints of job {payload.get('job_id')!r}, not {self.job_id!r}")
        _unwrap(self.model).load_state_dict(payload["model"])
        if self.optimizer is not None and payload["optimizer"] is not None:
            self.optimizer.load_state_dict(payload["optimizer"])
        if self.scheduler is not None and payload["scheduler"] is not None:
            self.scheduler.load_state_dict(payload["scheduler"])
        restore_rng_state(payload["rng"])
        self.step = int(payload["step"])
        self._consumed = int(payload["data"]["consumed"])
        self._pending_data = payload["data"]
        losses = payload["losses"]
        self._initial_losses = [float(x) for x in losses["initial"]]
        self._recent_losses.extend(float(x) for x in losses["recent"])
        self._loss_count = int(losses["count"])
        self._train_seconds_before = float(payload["train_seconds_total"])
        self.extra = dict(payload.get("extra") or {})
        self.resumed_from = str(loaded.path)
        self.last_checkpoint = str(loaded.path)
        self._saved_step = self.step
        self.corrupt_checkpoints = [{"path": str(p), "problem": why} for p, why in loaded.skipped]


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None
