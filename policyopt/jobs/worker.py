"""Process entry point that runs one lease of one zoo job (what the executor spawns per round).

    python -m policyopt.jobs.worker --job-type resnet-bs32 --job-id j0 --checkpoint-dir ckpt/j0 \
        --steps-total 300 --lease-seconds 10 --threads 1 --progress-file out/j0.json \
        [--device cpu|cuda:0] [--keep-workers --lease-file L.json --renewal-wait 5] \
        [--dp 2 --ga 2 --gc] [--cpu-affinity 0,1]

Resume from the newest valid checkpoint → train until the lease ends or ``--steps-total`` steps are
done → checkpoint → write the progress JSON (``steps_done``, ``steps_per_s``,
``steady_steps_per_s``, ``initial_loss``, ``final_loss``, ``status``, ...). The lease deadline is
``--lease-seconds`` after training starts (after imports and resume); an executor that needs an
absolute deadline writes a lease file (``{"deadline": unix_time, "steps_limit": null,
"keep_workers": false, "lease_id": 1}``) and passes ``--lease-file``; rewriting it with a new
``lease_id`` renews the lease of a running worker. SIGTERM stops at the next step boundary and
checkpoints. Exit status: 0 = lease ended / job completed / stopped, 1 = failed (the progress file
says why), 2 = bad arguments.

With ``--dp N`` this process is rank 0 and starts ranks 1..N-1 as child processes (same
arguments plus ``--rank``/``--master-port``); only rank 0 writes checkpoints and progress.
With ``--dp N --rank R --master-addr A --master-port P`` this process is rank ``R`` of a group whose
ranks were started separately (by an executor, one per worker slot, possibly on other machines);
rank 0 hosts the rendezvous at ``A:P``. Every rank resumes from the same checkpoint (the group
checks that all resumed the same step); rank 0 writes checkpoints and the progress record, and
ranks > 0 write a small record of their own (``rank``, ``pid``, ``status``) to their
``--progress-file``.
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from policyopt.errors import InputError, PolicyOptError

__all__ = ["build_parser", "main", "run_worker", "worker_command", "read_progress"]


def worker_command(job_type: str, job_id: str, checkpoint_dir: Path | str, progress_file: Path | str,
                   **options: Any) -> list[str]:
    """The argv that starts a worker, for an executor: ``options`` map to flags by name
    (``steps_total=300`` → ``--steps-total 300``; ``True`` → a bare flag; ``None``/``False`` → omitted;
    a list or tuple → comma-separated, as for ``cpu_affinity``)."""
    known = {a.dest for a in build_parser()._actions}
    cmd = [sys.executable, "-m", "policyopt.jobs.worker", "--job-type", job_type, "--job-id", job_id,
           "--checkpoint-dir", str(checkpoint_dir), "--progress-file", str(progress_file)]
    for name, value in options.items():
        if name not in known or name in ("local_peer", "help"):
            raise InputError(f"options.{name}", value, "not a worker option")
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            cmd.append(flag)
        elif isinstance(value, (list, tuple)):
            cmd += [flag, ",".join(str(v) for v in value)]
        else:
            cmd += [flag, str(value)]
    return cmd


def read_progress(path: Path | str) -> dict[str, Any] | None:
    """The worker's progress record, or ``None`` while it has not written one yet (writes are atomic)."""
    import json

    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None


def _cores(text: str) -> list[int]:
    try:
        cores = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cpu-affinity must be comma-separated core ids, got {text!r}") from None
    if not cores or min(cores) < 0:
        raise argparse.ArgumentTypeError(f"--cpu-affinity needs non-negative core ids, got {text!r}")
    return cores


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m policyopt.jobs.worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--job-type", required=True, help="a name from policyopt.jobs.JOB_TYPES")
    p.add_argument("--job-id", required=True)
    p.add_argument("--checkpoint-dir", required=True, type=Path)
    p.add_argument("--progress-file", type=Path, default=None, help="progress JSON (rank 0)")
    p.add_argument("--steps-total", type=int, default=None, help="job step budget (default: the job type's)")
    p.add_argument("--lease-seconds", type=float, default=None, help="lease length from the start of training")
    p.add_argument("--lease-steps", type=int, default=None, help="at most this many steps in this lease")
    p.add_argument("--lease-file", type=Path, default=None, help="JSON lease (absolute deadline), polled for renewals")
    p.add_argument("--keep-workers", action="store_true", help="at lease end wait for a renewal instead of exiting")
    p.add_argument("--renewal-wait", type=float, default=0.0, help="seconds to wait for a renewal (--keep-workers)")
    p.add_argument("--checkpoint-interval", type=float, default=None, help="also checkpoint every S seconds")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per process")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:i]")
    p.add_argument("--cpu-affinity", type=_cores, default=None, help="pin to these cores, e.g. 0,1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dp", type=int, default=1, help="data-parallel processes")
    p.add_argument("--ga", type=int, default=1, help="gradient-accumulation micro-steps")
    p.add_argument("--gc", action="store_true", help="gradient checkpointing")
    p.add_argument("--loss-log", type=Path, default=None, help="append 'step loss' lines (rank 0)")
    p.add_argument("--warmup-steps", type=int, default=2, help="steps excluded from steady_steps_per_s")
    p.add_argument("--no-checkpoint", action="store_true", help="neither resume nor save (profiling)")
    p.add_argument("--measure-forward", action="store_true", help="time forward passes (fwd_time_s)")
    p.add_argument("--measure-allreduce", action="store_true", help="measure all-reduce bandwidth (dp > 1)")
    p.add_argument("--sync-dir", type=Path, default=None, help="start training when --sync-count processes are ready")
    p.add_argument("--sync-count", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1,
                   help="profiling: run the lease this many times in this process (needs --no-checkpoint); "
                        "repeat r>0 writes PROGRESS-r<r>.json")
    p.add_argument("--rank", type=int, default=0, help="this process's rank (with --master-port)")
    p.add_argument("--master-addr", default="127.0.0.1", help="rendezvous host (rank 0's machine)")
    p.add_argument("--master-port", type=int, default=0,
                   help="rendezvous port: the --dp ranks were started separately, this is rank --rank")
    p.add_argument("--rendezvous-timeout", type=float, default=120.0,
                   help="seconds to wait for every rank to join (and the collective timeout)")
    p.add_argument("--local-peer", action="store_true", help=argparse.SUPPRESS)
    return p


def _validate(args: argparse.Namespace) -> None:
    checks = [
        ("threads", args.threads, args.threads >= 1, "must be >= 1"),
        ("dp", args.dp, args.dp >= 1, "must be >= 1"),
        ("ga", args.ga, args.ga >= 1, "must be >= 1"),
        ("steps_total", args.steps_total, args.steps_total is None or args.steps_total >= 0, "must be >= 0"),
        ("lease_seconds", args.lease_seconds, args.lease_seconds is None or args.lease_seconds >= 0, "must be >= 0"),
        ("lease_steps", args.lease_steps, args.lease_steps is None or args.lease_steps >= 0, "must be >= 0"),
        ("sync_count", args.sync_count, args.sync_count >= 1, "must be >= 1"),
        ("rank", args.rank, 0 <= args.rank < args.dp, "must be in 0 .. dp-1"),
        ("rank", args.rank, args.rank == 0 or args.master_port > 0, "ranks > 0 need --master-port"),
        ("master_port", args.master_port, 0 <= args.master_port < 65536, "must be a TCP port"),
        ("rendezvous_timeout", args.rendezvous_timeout, args.rendezvous_timeout > 0, "must be > 0"),
        ("repeats", args.repeats, args.repeats >= 1 and (args.repeats == 1 or args.no_checkpoint),
         "must be >= 1, and > 1 only with --no-checkpoint"),
        ("device", args.device, args.device == "cpu" or args.device.startswith("cuda"), "must be cpu or cuda[:i]"),
    ]
    for field, value, ok, problem in checks:
        if not ok:
            raise InputError(field, value, problem)
    if args.keep_workers and args.lease_file is None and args.renewal_wait > 0:
        raise InputError("renewal_wait", args.renewal_wait, "renewals arrive through --lease-file; give one")


def _wait_for_peers(sync_dir: Path, count: int, timeout_s: float = 300.0) -> None:
    """File barrier: announce readiness, then wait until ``count`` processes have."""
    sync_dir.mkdir(parents=True, exist_ok=True)
    (sync_dir / f"ready-{os.getpid()}").touch()
    t0 = time.time()
    while sum(1 for p in sync_dir.iterdir() if p.name.startswith("ready-")) < count:
        if time.time() - t0 > timeout_s:
            raise PolicyOptError(f"sync barrier {sync_dir}: fewer than {count} processes ready after {timeout_s:.0f}s")
        time.sleep(0.002)


def _allreduce_bandwidth(ctx: Any, torch: Any, elements: int = 1 << 20, repeats: int = 5) -> float:
    """Bus bandwidth of an all-reduce in bytes/s: ``2(n-1)/n · bytes / seconds`` (ring algorithm volume)."""
    import torch.distributed as dist

    tensor = torch.ones(elements, dtype=torch.float32, device=ctx.device)
    dist.all_reduce(tensor)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(repeats):
        dist.all_reduce(tensor)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    seconds = (time.perf_counter() - t0) / repeats
    return 2 * (ctx.world - 1) / ctx.world * elements * 4 / seconds


def _spawn_peers(argv: Sequence[str], dp: int, port: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-m", "policyopt.jobs.worker", *argv,
                              "--rank", str(r), "--master-port", str(port), "--local-peer"])
            for r in range(1, dp)]


def _pin_all_threads(cores: Sequence[int]) -> None:
    """Restrict every existing thread of this process (and so the threads it creates) to ``cores``."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:  # a thread that just ended
            pass
        except OSError as exc:
            raise InputError("cpu_affinity", list(cores), f"cannot pin to these cores: {exc.strerror}") from exc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_worker(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run one lease; returns the process exit status (see the module docstring)."""
    _validate(args)
    peers: list[subprocess.Popen[bytes]] = []
    port = args.master_port
    if args.dp > 1 and args.rank == 0 and args.master_port == 0:  # start the peers first: they import torch in parallel
        port = _free_port()
        peers = _spawn_peers(argv, args.dp, port)
    try:
        return _run(args, peers, port)
    except BaseException:
        for proc in peers:
            if proc.poll() is None:
                proc.kill()
        raise


def _repeat_path(path: Path | None, repeat: int) -> Path | None:
    """``progress.json`` for repeat 0, ``progress-r1.json`` for repeat 1, ... (profiling repeats)."""
    if path is None or repeat == 0:
        return path
    return path.with_name(f"{path.stem}-r{repeat}{path.suffix}")


def _run(args: argparse.Namespace, peers: list[subprocess.Popen[bytes]], port: int) -> int:
    import torch

    from .plans import ExecutionPlan, init_distributed
    from .zoo import get_job_type

    if args.cpu_affinity is not None:  # after the imports (they may use every core), before any compute
        _pin_all_threads(args.cpu_affinity)
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    spec = get_job_type(args.job_type)
    plan = ExecutionPlan(args.dp, args.ga, args.gc)
    plan.micro_batch(spec.batch_size)
    primary = args.rank == 0
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError("device", args.device, "CUDA is not available on this machine")
        first = device.index or 0
        if args.master_port and not args.local_peer:  # ranks started separately, each with its own GPU
            if first >= torch.cuda.device_count():
                raise InputError("device", args.device, f"{torch.cuda.device_count()} CUDA device(s) visible")
        else:  # this process starts the ranks: rank r takes the r-th GPU from --device on
            if first + args.dp > torch.cuda.device_count():
                raise InputError("dp", args.dp, f"NCCL needs one GPU per rank; {torch.cuda.device_count()} visible")
            device = torch.device("cuda", first + args.rank)
        torch.cuda.set_device(device)
    watchdog_stop = threading.Event()
    state: dict[str, Any] = {"session": None, "metadata": {}}

    def watch_peers() -> None:  # a dead peer would block rank 0 in a collective: fail fast instead
        while not watchdog_stop.wait(0.2):
            for rank, proc in enumerate(peers, start=1):
                code = proc.poll()
                if code not in (None, 0):
                    _write_failure(args, state, f"data-parallel rank {rank} exited with status {code}")
                    for other in peers:
                        if other.poll() is None:
                            other.kill()
                    os._exit(1)

    def watch_parent(parent: int) -> None:  # ranks > 0 die with rank 0
        while not watchdog_stop.wait(0.5):
            if os.getppid() != parent:
                os._exit(1)

    if peers:
        threading.Thread(target=watch_peers, daemon=True).start()
    if not primary and args.local_peer:
        threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()

    def on_sigterm(*_: Any) -> None:
        if state["session"] is not None:
            state["session"].request_stop()  # stop at the next step boundary and checkpoint
        else:  # still starting (e.g. waiting for the other ranks): nothing to save yet
            os._exit(0)

    previous_handler = signal.signal(signal.SIGTERM, on_sigterm)
    status = 1
    try:
        ctx = init_distributed(args.rank, plan.dp, port, device, timeout_s=args.rendezvous_timeout,
                               addr=args.master_addr)
        for repeat in range(args.repeats):
            _train_once(args, spec, plan, ctx, device, repeat, state)
        status = 0
    except Exception as exc:  # noqa: BLE001 - the worker records any failure, then exits non-zero
        if primary:
            _write_failure(args, state, f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
        for proc in peers:  # peers would block in a collective until the gloo/NCCL timeout
            if proc.poll() is None:
                proc.kill()
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
        watchdog_stop.set()
        for proc in peers:
            if proc.wait() != 0:
                status = 1
        if not primary and not args.local_peer:
            _write_rank_record(args, state, "failed" if status else None)
        if plan.dp > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            if not primary:  # skip interpreter teardown racing the communication threads
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
    session = state["session"]
    if primary and session is not None and status == 0:
        rec = session.progress()
        print(f"{args.job_id}: {rec['status']} at step {rec['steps_done']}/{rec['steps_total']} "
              f"({rec['steps_this_session']} steps, {rec['steps_per_s'] or 0:.2f} steps/s, "
              f"loss {rec['initial_loss']} -> {rec['final_loss']})", flush=True)
    return status


def _write_rank_record(args: argparse.Namespace, state: dict[str, Any], status: str | None) -> None:
    """A rank > 0 started on its own: ``{job_id, rank, pid, status, steps_done}`` in its progress file."""
    from .api import write_json_atomic

    if args.progress_file is None:
        return
    session = state["session"]
    record = {"job_id": args.job_id, "rank": args.rank, "pid": os.getpid(), "updated_at": time.time(),
              "status": status or (session.status if session is not None else "starting"),
              "steps_done": session.step if session is not None else None}
    write_json_atomic(args.progress_file, record)


def _write_failure(args: argparse.Namespace, state: dict[str, Any], error: str) -> None:
    """Record ``status = failed`` in the progress file unless the session already did."""
    from .api import write_json_atomic

    session = state["session"]
    if args.progress_file is None or args.rank != 0 or (session is not None and session.status == "failed"):
        return
    record = session.progress() if session is not None else {"job_id": args.job_id, **state["metadata"]}
    record.update(status="failed", error=error)
    write_json_atomic(_repeat_path(args.progress_file, state.get("repeat", 0)) or args.progress_file, record)


def _train_once(args: argparse.Namespace, spec: Any, plan: Any, ctx: Any, device: Any, repeat: int,
                state: dict[str, Any]) -> None:
    """Build the job, resume, train one lease, checkpoint, write progress (one profiling repeat)."""
    import torch

    from .api import Lease, TrainingSession
    from .plans import enable_gc, train_step, wrap_model

    primary = args.rank == 0
    state["repeat"] = repeat
    state["session"] = None
    metadata: dict[str, Any] = {
        "job_type": spec.name, "plan": plan.label(), "dp": plan.dp, "ga": plan.ga, "gc": plan.gc,
        "threads": args.threads, "device": str(device), "global_batch": spec.batch_size,
        "micro_batch": plan.micro_batch(spec.batch_size), "cpu_affinity": args.cpu_affinity, "repeat": repeat,
    }
    state["metadata"] = metadata
    torch.manual_seed(args.seed)
    job = spec.build(args.seed, device)
    enable_gc(job.model, plan.gc)
    model = wrap_model(job.model, ctx)
    if args.measure_allreduce and ctx.active:
        metadata["allreduce_bytes_per_s"] = _allreduce_bandwidth(ctx, torch)
    if args.sync_dir is not None and primary:  # other ranks wait in the first collective
        _wait_for_peers(args.sync_dir / f"r{repeat}", args.sync_count)
    if args.lease_file is not None and args.lease_file.exists() and primary:
        lease = Lease.read(args.lease_file)
    elif primary and args.lease_seconds is not None:
        lease = Lease.for_seconds(args.lease_seconds, args.lease_steps, args.keep_workers)
    elif primary:
        lease = Lease(None, args.lease_steps, args.keep_workers)
    else:
        lease = Lease()
    session = TrainingSession(
        args.job_id, args.checkpoint_dir, model, job.optimizer, lease=lease,
        steps_total=args.steps_total if args.steps_total is not None else spec.default_steps,
        lease_file=args.lease_file if primary else None, renewal_wait_s=args.renewal_wait,
        checkpoint_interval_s=args.checkpoint_interval,
        progress_file=_repeat_path(args.progress_file, repeat) if primary else None,
        warmup_steps=args.warmup_steps, resume=not args.no_checkpoint, save=not args.no_checkpoint,
        is_primary=primary, agree=ctx.agree if ctx.active else None, metadata=metadata)
    state["session"] = session
    forward_total, forward_steps = 0.0, 0
    loss_log = None
    if args.loss_log is not None and primary:
        args.loss_log.parent.mkdir(parents=True, exist_ok=True)
        loss_log = open(args.loss_log, "a", buffering=1)
    try:
        with session as s:
            if ctx.active:
                _check_same_step(ctx, torch, s.step)
                if not primary and not args.local_peer:
                    _write_rank_record(args, state, None)
            for batch in s.wrap(job.stream):
                loss, forward_s = train_step(job, model, batch, plan, ctx, args.measure_forward)
                s.report(loss)
                if loss_log is not None:
                    loss_log.write(f"{s.step + 1} {loss!r}\n")
                if args.measure_forward and s.step - s.session_start_step >= args.warmup_steps:
                    forward_total += forward_s
                    forward_steps += 1
                    metadata["fwd_time_s"] = forward_total / forward_steps
            metadata["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            if device.type == "cuda":
                metadata["max_memory_allocated"] = int(torch.cuda.max_memory_allocated(device))
    finally:
        if loss_log is not None:
            loss_log.close()


def _check_same_step(ctx: Any, torch: Any, step: int) -> None:
    """Every rank resumed the same checkpoint step (one all-reduce of ``(step, -step)`` with MAX)."""
    import torch.distributed as dist

    both = torch.tensor([step, -step], dtype=torch.int64, device=ctx.device)
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    high, low = int(both[0].item()), -int(both[1].item())
    if high != low:
        raise PolicyOptError(f"data-parallel ranks resumed different steps ({low} .. {high})")


def main(argv: Sequence[str] | None = None) -> int:
    # Worker processes share cores (pairs, colocated jobs): OpenMP threads that spin while waiting
    # collapse throughput when oversubscribed (measured here: LSTM on 2 threads 2.2 vs 11.4 steps/s
    # with PASSIVE). Takes effect only if torch is not imported yet; an explicit setting wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        return run_worker(args, [a for a in argv])
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
