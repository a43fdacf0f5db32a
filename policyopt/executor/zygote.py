"""Fork server for worker processes: import torch once, fork a worker per launch.

Importing torch takes 4–7 s on the loaded 2-core development machine, longer than a short round.
``python -m policyopt.executor.zygote EXITS_DIR`` imports torch, the job zoo and the worker module
(and loads the bundled digits data), then reads one JSON request per line on stdin::

    {"id": 7, "argv": ["--job-type", "lstm-bs10", ...], "log": "/path/worker.log", "env": {...}}

and for each forks a child that starts a new session (``setsid``, so signals reach only it),
redirects stdin to ``/dev/null`` and stdout/stderr to ``log``, applies ``env`` and runs
``policyopt.jobs.worker.main(argv)`` — the same entry point as ``python -m
policyopt.jobs.worker`` — then ``os._exit`` with its status. The reply on stdout is
``{"id": 7, "pid": 12345}``. The zygote reaps its children and writes
``EXITS_DIR/<pid>.json = {"pid", "status"}`` atomically (``status``: the exit code, or ``-N`` for
a child killed by signal ``N``).

No tensor computation happens in the zygote, so torch's thread pools do not exist yet when it
forks; each child sets its own thread count. Before it reports ready, a throw-away child runs two
steps of one job type per family (:func:`warm_pages`), so the first real worker does not pay for
reading torch's kernels from disk. ``--warm TYPE,TYPE,...`` (the run's job types) limits that to
the families those job types belong to, and ``--warm-threads N,N,...`` (the run's slots' thread
counts) to the thread counts the run uses (:func:`warm_plan`); ``--warm ""`` warms nothing.
Without them every family is warmed on 1 and 2 threads. On end of stdin (the executor exited or was killed)
the zygote stops accepting launches, keeps reaping until its children have exited (they end by
themselves when their lease runs out), and exits.

``--die-with-parent`` (the Ray backend: the fork server belongs to a node's actor): when its parent
is gone the fork server kills its workers and exits, and each worker gets ``SIGKILL`` from the
kernel when the fork server dies (``PR_SET_PDEATHSIG``), so the processes of a lost node end with
it instead of training on.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
from pathlib import Path
from typing import Any, Iterable

__all__ = ["main", "preload", "warm_pages", "warm_plan", "warm_arguments", "WARM_JOB_TYPES"]


def preload() -> None:
    """Import what every worker needs (the slow part of a worker's start)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as policyopt.jobs.worker.main does, before torch
    import torch  # noqa: F401

    import torch._dynamo  # noqa: F401  - the first optimizer constructed imports it (seconds)

    from policyopt.jobs import api, checkpoint, plans, worker, zoo  # noqa: F401
    from policyopt.jobs.data import _digits, _markov_successors

    _digits()  # numpy only: scikit-learn's bundled digits
    _markov_successors(zoo.VOCAB)


#: one job type per family: their first steps pull every kernel the zoo uses into the page cache
WARM_JOB_TYPES = ("resnet-bs32", "lstm-bs10", "transformer-bs16", "recommendation-bs128")


def warm_plan(job_types: Iterable[str] | None = None, threads: Iterable[int] | None = None
              ) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """What the fork server warms for a run of ``job_types`` on slots of ``threads`` torch threads:
    the job type of :data:`WARM_JOB_TYPES` of each family among ``job_types`` (every family when
    ``None``; unknown names are left to the workers, which report them), on 1 thread when some slot
    has one thread and on 2 when some slot has more (multi-threaded kernels run the same code on 2
    threads as on 16; both when ``None``)."""
    from policyopt.jobs.zoo import JOB_TYPES

    types: tuple[str, ...]
    if job_types is None:
        types = WARM_JOB_TYPES
    else:
        families = {JOB_TYPES[n].family for n in job_types if n in JOB_TYPES}
        types = tuple(t for t in WARM_JOB_TYPES if JOB_TYPES[t].family in families)
    counts = (1, 2) if threads is None else tuple(sorted({min(int(n), 2) for n in threads if int(n) > 0}))
    return types, counts


def warm_arguments(job_types: Iterable[str] | None, threads: Iterable[int] | None) -> list[str]:
    """The fork server's command-line options that warm only what a run of ``job_types`` on slots of
    ``threads`` threads uses (none for ``None``: warm everything)."""
    args = []
    if job_types is not None:
        args.append("--warm=" + ",".join(sorted({str(n) for n in job_types})))
    if threads is not None:
        args.append("--warm-threads=" + ",".join(str(n) for n in sorted({int(n) for n in threads})))
    return args


def warm_pages(job_types: tuple[str, ...] = WARM_JOB_TYPES, steps: int = 2, threads: tuple[int, ...] = (1, 2)) -> None:
    """Run ``steps`` training steps of each job type, on each of ``threads`` thread counts.

    Called in a throw-away child of the fork server: the first process that runs a kernel reads its
    code from torch's shared libraries on disk (seconds on a loaded machine); afterwards the pages
    are in the page cache, which every later worker shares. The fork server itself never computes,
    so its OpenMP and BLAS thread pools stay uninitialized.
    """
    import torch

    from policyopt.jobs.zoo import get_job_type

    for n in threads:
        torch.set_num_threads(n)
        for name in job_types:
            job = get_job_type(name).build(0, "cpu")
            for _ in range(steps):
                job.optimizer.zero_grad()
                loss = job.loss_fn(job.model, next(job.stream))
                loss.backward()
                job.optimizer.step()


def _write_exit(exits: Path, pid: int, status: int) -> None:
    tmp = exits / f".{pid}.tmp"
    tmp.write_text(json.dumps({"pid": pid, "status": status}))
    os.replace(tmp, exits / f"{pid}.json")


def _reap(exits: Path, children: set[int]) -> None:
    while children:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        status = os.waitstatus_to_exitcode(raw)
        _write_exit(exits, pid, status)


def die_with_parent() -> None:
    """Ask the kernel for ``SIGKILL`` when this process's parent exits (Linux; a no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _child(request: dict[str, Any], tied: bool = False) -> None:
    """Runs in the forked child; never returns."""
    status = 1
    try:
        if tied:
            die_with_parent()
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.stdin = open(os.devnull)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        from policyopt.jobs import worker

        status = int(worker.main([str(a) for a in request["argv"]]))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - report and exit non-zero, never return into the zygote loop
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        os._exit(status)


def _parse(argv: list[str]) -> tuple[Path, bool, list[str] | None, list[int] | None] | None:
    """``(exits dir, tied, warm job types, warm thread counts)``, or ``None`` for a bad command line."""
    tied, types, threads, rest = False, None, None, []
    for a in argv:
        if a == "--die-with-parent":
            tied = True
        elif a.startswith("--warm="):
            types = [t for t in a.split("=", 1)[1].split(",") if t]
        elif a.startswith("--warm-threads="):
            try:
                threads = [int(t) for t in a.split("=", 1)[1].split(",") if t]
            except ValueError:
                return None
        else:
            rest.append(a)
    if len(rest) != 1 or rest[0].startswith("--"):
        return None
    return Path(rest[0]), tied, types, threads


def main(argv: list[str] | None = None) -> int:
    parsed = _parse(list(sys.argv[1:] if argv is None else argv))
    if parsed is None:
        print("usage: python -m policyopt.executor.zygote [--die-with-parent] [--warm=TYPE,...] "
              "[--warm-threads=N,...] EXITS_DIR", file=sys.stderr)
        return 2
    exits, tied, warm_types, warm_threads = parsed
    parent = os.getppid()
    exits.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the executor, which stops the workers
    preload()
    types, threads = warm_plan(warm_types, warm_threads)
    if types and threads:
        warm = os.fork()
        if warm == 0:
            code = 0
            try:
                warm_pages(types, threads=threads)
            except BaseException:  # noqa: BLE001 - warming is an optimization; workers report real errors
                code = 1
            os._exit(code)
        os.waitpid(warm, 0)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "warmed": {"job_types": list(types),
                                                                      "threads": list(threads)}}) + "\n")
    out.flush()
    children: set[int] = set()
    stdin = sys.stdin.buffer
    buffer = b""
    open_input = True
    while open_input or children:
        if tied and os.getppid() != parent:  # the actor (the node) is gone: so are its workers
            for pid in list(children):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return 1
        if open_input:
            ready, _, _ = select.select([stdin], [], [], 0.05)
        else:
            ready = []
            select.select([], [], [], 0.05)
        _reap(exits, children)
        if not ready:
            continue
        chunk = os.read(stdin.fileno(), 65536)
        if not chunk:
            open_input = False
            continue
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if not line.strip():
                continue
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request, tied)
            children.add(pid)
            out.write(json.dumps({"id": request.get("id"), "pid": pid}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
