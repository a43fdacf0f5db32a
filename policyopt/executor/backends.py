"""Where job processes run: local processes (the embedded default) or Ray actors (several machines).

Both backends run the same entry point, :mod:`policyopt.jobs.worker` (one job, one lease chain),
and talk to it only through files: the executor writes the **lease file** (``Lease.write``: an
absolute deadline, ``keep_workers``, ``lease_id``) and reads the **progress file** (the worker's
JSON record with ``pid``, ``status``, ``steps_done``, losses, …). A worker whose lease ends with
``keep_workers`` waits up to ``renewal_wait`` seconds for a new ``lease_id`` and carries on in the
same process (lease renewal); ``SIGTERM`` makes it stop at the next step and checkpoint.

A backend implements :class:`Backend`:

``start(launch) -> ProcessHandle`` · ``renew(handle, lease)`` · ``stop(handle)`` (SIGTERM) ·
``kill(handle)`` (SIGKILL) · ``poll(handle) -> exit status | None`` · ``progress(handle)`` ·
``log_tail(handle)`` · ``retire(handle_dict, timeout)`` (end a process left by a previous executor)
· ``rendezvous(worker_id) -> (addr, port)`` (a free port on that slot's machine, for a
data-parallel job whose rank 0 runs there) · ``slot_nodes(worker_ids) -> {worker_id: node}`` (the
machine of each live slot; slots whose machine is gone are absent) · ``close()``.

A data-parallel job of ``K`` workers is ``K`` processes, one :class:`Launch` per rank, each on its
own slot (``workers = (slot,)``), all with the rendezvous of rank 0's machine.

Exit statuses follow the worker: 0 (completed, lease ended, stopped), 1 (failed: the progress file
says why), 2 (bad arguments), ``-N`` (killed by signal ``N``).

:class:`LocalProcessBackend` starts workers on this machine, by default through a fork server
(:mod:`policyopt.executor.zygote`) that has imported torch once, so a start costs a fork and a
checkpoint load instead of 4–7 s of imports; ``launcher="spawn"`` runs ``python -m
policyopt.jobs.worker`` as a fresh process instead.

:class:`~policyopt.executor.ray_backend.RayBackend` (in :mod:`policyopt.executor.ray_backend`)
creates one Ray actor per worker slot; each actor holds a :class:`LocalProcessBackend` on its node
and runs the worker processes there. Ray is imported only when a ``RayBackend`` is created.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from policyopt.errors import InputError, PolicyOptError

from .zygote import warm_arguments

__all__ = [
    "Launch",
    "ProcessHandle",
    "Backend",
    "BackendError",
    "LocalProcessBackend",
    "LAUNCHERS",
    "process_start_ticks",
    "TERMINAL_STATUSES",
    "with_lease",
]

LAUNCHERS = ("fork", "spawn")
#: progress ``status`` values a worker writes when it exits normally
TERMINAL_STATUSES = ("completed", "lease_ended", "stopped", "data_exhausted")


class BackendError(PolicyOptError):
    """A backend could not start or reach a worker process."""


@dataclass(frozen=True)
class Launch:
    """What to run: one job's worker process on one slot, with its first lease.

    ``lease`` is written to ``lease_file`` before the process starts (the worker reads it at
    start). ``checkpoint_interval`` adds periodic checkpoints, so a process that dies loses at
    most that many seconds of training.
    """

    job_id: str
    job_type: str
    steps_total: int
    seed: int
    checkpoint_dir: str
    progress_file: str
    lease_file: str
    log_file: str
    threads: int = 1
    device: str = "cpu"
    cpu_affinity: tuple[int, ...] | None = None
    renewal_wait: float = 30.0
    checkpoint_interval: float | None = None
    lease: dict[str, Any] = field(default_factory=dict)
    workers: tuple[str, ...] = ()
    launch_id: int = 0
    rank: int = 0
    world: int = 1
    master_addr: str = ""
    master_port: int = 0
    rendezvous_timeout: float = 120.0

    def argv(self) -> list[str]:
        """The worker's arguments (``python -m policyopt.jobs.worker`` + these)."""
        from policyopt.jobs.worker import worker_command

        group: dict[str, Any] = {}
        if self.world > 1:
            group = {"dp": self.world, "rank": self.rank, "master_addr": self.master_addr,
                     "master_port": self.master_port, "rendezvous_timeout": self.rendezvous_timeout}
        cmd = worker_command(self.job_type, self.job_id, self.checkpoint_dir, self.progress_file,
                             steps_total=self.steps_total, seed=self.seed, threads=self.threads,
                             device=self.device, cpu_affinity=list(self.cpu_affinity) if self.cpu_affinity else None,
                             lease_file=self.lease_file, keep_workers=True, renewal_wait=self.renewal_wait,
                             checkpoint_interval=self.checkpoint_interval, **group)
        return cmd[3:]  # drop "python -m policyopt.jobs.worker"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpu_affinity"] = list(self.cpu_affinity) if self.cpu_affinity is not None else None
        d["workers"] = list(self.workers)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Launch":
        data = dict(d)
        data["cpu_affinity"] = tuple(data["cpu_affinity"]) if data.get("cpu_affinity") is not None else None
        data["workers"] = tuple(data.get("workers") or ())
        return cls(**data)


@dataclass(frozen=True)
class ProcessHandle:
    """A started worker process (JSON-serializable, kept in the executor's state)."""

    job_id: str
    launch_id: int
    pid: int
    start_ticks: int | None
    launched_at: float
    progress_file: str
    lease_file: str
    log_file: str
    workers: tuple[str, ...]
    node: str = "local"
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["workers"] = list(self.workers)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ProcessHandle":
        """From :meth:`to_dict` output; other keys (the executor adds ``lease_id``) are ignored."""
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in d.items() if k in names}
        data["workers"] = tuple(data.get("workers") or ())
        return cls(**data)


class Backend(Protocol):
    """What the executor needs from a backend (see the module docstring)."""

    name: str

    def start(self, launch: Launch) -> ProcessHandle: ...

    def renew(self, handle: ProcessHandle, lease: Mapping[str, Any]) -> None: ...

    def stop(self, handle: ProcessHandle) -> None: ...

    def kill(self, handle: ProcessHandle) -> None: ...

    def poll(self, handle: ProcessHandle) -> int | None: ...

    def progress(self, handle: ProcessHandle) -> dict[str, Any] | None: ...

    def log_tail(self, handle: ProcessHandle, lines: int = 5) -> str: ...

    def retire(self, handle: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any] | None: ...

    def rendezvous(self, worker_id: str) -> tuple[str, int]: ...

    def slot_nodes(self, worker_ids: Sequence[str]) -> dict[str, str]: ...

    def close(self) -> None: ...


# ----------------------------------------------------------------------------------------- helpers
def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or ``None``
    when there is no such process. With the pid it identifies a process across pid reuse."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    fields = raw[raw.rfind(")") + 2:].split()
    return int(fields[19])  # field 22 overall; fields[0] is field 3 (state)


def _process_state(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()[0]


def _alive(pid: int, ticks: int | None) -> bool:
    """True while ``pid`` is the same process (start ticks match) and not a zombie."""
    now = process_start_ticks(pid)
    if now is None or (ticks is not None and now != ticks):
        return False
    return _process_state(pid) not in ("Z", "X")


def write_json_atomic(path: str | Path, record: Mapping[str, Any]) -> None:
    """JSON to a temporary file, then ``os.replace`` over ``path`` (as ``policyopt.jobs.api`` does,
    without importing torch into the executor)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(json.dumps(dict(record), indent=1, sort_keys=True))
    os.replace(tmp, path)


def _write_lease(path: str | Path, lease: Mapping[str, Any]) -> None:
    write_json_atomic(path, {"deadline": lease.get("deadline"), "steps_limit": lease.get("steps_limit"),
                             "keep_workers": bool(lease.get("keep_workers", False)),
                             "lease_id": int(lease.get("lease_id", 0))})


def _read_json(path: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _host_address() -> str:
    """This machine's address for a rendezvous: Ray's node address when in a Ray worker, else loopback."""
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    return "127.0.0.1"


def _status_from_progress(record: Mapping[str, Any] | None) -> int:
    """Exit status inferred for a process that is gone without a recorded exit status."""
    if record is not None and record.get("status") in TERMINAL_STATUSES:
        return 0
    if record is not None and record.get("status") == "failed":
        return 1
    return -int(signal.SIGKILL)


# ----------------------------------------------------------------------------------------- local
class _Zygote:
    """Client of a :mod:`policyopt.executor.zygote` fork server."""

    def __init__(self, exits_dir: Path, log_file: Path, env: Mapping[str, str], tied: bool = False,
                 warm: Sequence[str] = ()) -> None:
        self.exits_dir = exits_dir
        self._lock = threading.Lock()
        self._next = 0
        exits_dir.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "policyopt.executor.zygote",
                                          *(["--die-with-parent"] if tied else []), *warm, str(exits_dir)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=dict(env))
        self.log_file = log_file
        self.pid: int | None = None  # known once the fork server said it is ready
        self.warmed: dict[str, list[Any]] | None = None  # what it warmed (job types, thread counts)

    def _ready(self) -> None:
        """Wait for the fork server's ready line (it imports torch first: seconds)."""
        if self.pid is not None:
            return
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise BackendError(f"the fork server exited with status {self.proc.wait()} before it was ready "
                               f"(see {self.log_file})")
        ready = json.loads(line)
        self.pid = int(ready["pid"])
        self.warmed = ready.get("warmed")

    def fork(self, argv: Sequence[str], log: str, env: Mapping[str, str]) -> int:
        with self._lock:
            self._ready()
            if self.proc.poll() is not None:
                raise BackendError(f"the fork server exited with status {self.proc.returncode}")
            self._next += 1
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write((json.dumps({"id": self._next, "argv": list(argv), "log": log,
                                               "env": dict(env)}) + "\n").encode())
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise BackendError(f"the fork server exited with status {self.proc.wait()}")
            reply = json.loads(line)
            if reply.get("id") != self._next:
                raise BackendError(f"fork server reply out of order: {reply}")
            return int(reply["pid"])

    def close(self) -> None:
        """Close the request pipe; the fork server exits once its children have exited."""
        with self._lock:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass


class LocalProcessBackend:
    """Worker processes on this machine (see the module docstring).

    ``run_dir`` holds the fork server's files (``zygote.log``, ``exits/``). Environment variables
    in ``env`` are added to every worker's environment (``PYTHONPATH`` is set so that the worker
    imports this checkout of ``policyopt``). ``warm_job_types`` and ``warm_threads`` (the run's job
    types and its slots' thread counts) limit what the fork server warms before it is ready to the
    families and thread counts the run uses (:func:`~policyopt.executor.zygote.warm_plan`; ``None``:
    every family, on 1 and 2 threads).
    """

    name = "local"

    def __init__(self, run_dir: str | Path, launcher: str = "fork", env: Mapping[str, str] | None = None,
                 node: str = "local", tied: bool = False, warm_job_types: Sequence[str] | None = None,
                 warm_threads: Sequence[int] | None = None) -> None:
        if launcher not in LAUNCHERS:
            raise InputError("launcher", launcher, f"must be one of {', '.join(LAUNCHERS)}")
        if launcher == "fork" and not hasattr(os, "fork"):
            launcher = "spawn"
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.launcher = launcher
        self.node = node
        root = str(Path(__file__).resolve().parents[2])
        base = dict(os.environ)
        base["PYTHONPATH"] = os.pathsep.join([root, base.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        base.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.extra_env = {str(k): str(v) for k, v in (env or {}).items()}
        self.env = {**base, **self.extra_env}
        self._popen: dict[tuple[int, int | None], subprocess.Popen[bytes]] = {}
        self._zygote: _Zygote | None = None
        self.tied = tied  # workers die with the process that holds this backend (a Ray actor)
        self._warm = warm_arguments(warm_job_types, warm_threads)

    # -- topology
    def rendezvous(self, worker_id: str) -> tuple[str, int]:
        """A free TCP port on this machine for a data-parallel group whose rank 0 runs here."""
        from policyopt.jobs.worker import _free_port

        return _host_address(), _free_port()

    def slot_nodes(self, worker_ids: Sequence[str]) -> dict[str, str]:
        """Every slot runs on this machine."""
        return {w: self.node for w in worker_ids}

    # -- starting
    def _fork_server(self) -> _Zygote:
        if self._zygote is None or self._zygote.proc.poll() is not None:
            self._zygote = _Zygote(self.run_dir / "exits", self.run_dir / "zygote.log", self.env, self.tied,
                                   self._warm)
        return self._zygote

    @property
    def warmed(self) -> dict[str, list[Any]] | None:
        """What the fork server warmed before it was ready (``job_types``, ``threads``), once it is."""
        return self._zygote.warmed if self._zygote is not None else None

    def warm_up(self, wait: bool = True) -> None:
        """Start the fork server now; with ``wait``, block until it has imported torch."""
        if self.launcher == "fork":
            server = self._fork_server()
            if wait:
                with server._lock:
                    server._ready()

    def start(self, launch: Launch) -> ProcessHandle:
        for path in (launch.progress_file, launch.lease_file, launch.log_file):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(launch.checkpoint_dir).mkdir(parents=True, exist_ok=True)
        Path(launch.progress_file).unlink(missing_ok=True)
        _write_lease(launch.lease_file, launch.lease)
        argv = launch.argv()
        launched_at = time.time()
        if self.launcher == "fork":
            pid = self._fork_server().fork(argv, launch.log_file, self.extra_env)
            ticks = process_start_ticks(pid)
        else:
            with open(launch.log_file, "ab") as log:
                proc = subprocess.Popen([sys.executable, "-m", "policyopt.jobs.worker", *argv],
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                        start_new_session=True)
            pid = proc.pid
            ticks = process_start_ticks(pid)
            self._popen[(pid, ticks)] = proc
        return ProcessHandle(launch.job_id, launch.launch_id, pid, ticks, launched_at, launch.progress_file,
                             launch.lease_file, launch.log_file, tuple(launch.workers), self.node, launch.rank)

    # -- talking to a running worker
    def renew(self, handle: ProcessHandle, lease: Mapping[str, Any]) -> None:
        _write_lease(handle.lease_file, lease)

    def _signal(self, handle: ProcessHandle, sig: int) -> None:
        if _alive(handle.pid, handle.start_ticks):
            try:
                os.kill(handle.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, handle: ProcessHandle) -> None:
        self._signal(handle, signal.SIGTERM)

    def kill(self, handle: ProcessHandle) -> None:
        self._signal(handle, signal.SIGKILL)

    def poll(self, handle: ProcessHandle) -> int | None:
        proc = self._popen.get((handle.pid, handle.start_ticks))
        if proc is not None:
            code = proc.poll()
            if code is not None:
                self._popen.pop((handle.pid, handle.start_ticks), None)
            return code
        if self.launcher == "fork":
            exits = self.run_dir / "exits" / f"{handle.pid}.json"
            record = _read_json(exits)
            if record is not None and (handle.start_ticks is None or not _alive(handle.pid, handle.start_ticks)):
                return int(record["status"])
        if _alive(handle.pid, handle.start_ticks):
            return None
        # gone without a status we can read (a previous executor's process, or its fork server died)
        return _status_from_progress(self.progress(handle))

    def progress(self, handle: ProcessHandle) -> dict[str, Any] | None:
        record = _read_json(handle.progress_file)
        if record is not None and record.get("pid") not in (None, handle.pid):
            return None  # another process's record (the file is per launch, so only after pid confusion)
        return record

    def log_tail(self, handle: ProcessHandle, lines: int = 5) -> str:
        try:
            text = Path(handle.log_file).read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])

    def retire(self, handle: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
        """End a worker left running by a previous executor and return its last progress record.

        First its lease file gets an expired lease without renewal (a worker still starting up sees
        it and exits after resuming), then ``SIGTERM`` (checkpoint at the next step), then after
        ``timeout`` seconds ``SIGKILL``.
        """
        h = ProcessHandle.from_dict(handle)
        _write_lease(h.lease_file, {"deadline": time.time() - 1.0, "keep_workers": False,
                                    "lease_id": int(handle.get("lease_id", 0) or 0) + 1_000_000})
        deadline = time.time() + timeout
        if h.pid <= 0:  # never confirmed: wait for its progress record to show it ended
            while time.time() < deadline:
                record = _read_json(h.progress_file)
                if record is not None and record.get("status") in (*TERMINAL_STATUSES, "failed"):
                    return record
                time.sleep(0.1)
            return _read_json(h.progress_file)
        self.stop(h)
        while _alive(h.pid, h.start_ticks) and time.time() < deadline:
            time.sleep(0.05)
        if _alive(h.pid, h.start_ticks):
            self.kill(h)
            while _alive(h.pid, h.start_ticks):
                time.sleep(0.05)
        return self.progress(h)

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            try:
                self._zygote.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            self._zygote = None


def with_lease(launch: Launch, lease: Mapping[str, Any]) -> Launch:
    """A copy of ``launch`` with another first lease."""
    return replace(launch, lease=dict(lease))


def __getattr__(name: str) -> Any:
    """``RayBackend`` and ``WorkerActor`` live in :mod:`policyopt.executor.ray_backend`."""
    if name in ("RayBackend", "WorkerActor"):
        from . import ray_backend

        return getattr(ray_backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
