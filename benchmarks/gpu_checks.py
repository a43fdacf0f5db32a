"""GPU checks of the executor's pieces on the machine this runs on.

``memory``: the memory model (:func:`policyopt.perfmodel.memory.memory_table`) against the peak
``torch.cuda.max_memory_allocated`` that ``policyopt profile`` records per GPU plan
(``plan_samples.csv``, column ``peak_memory_bytes``). Per row it prints the model's terms
(weights, gradients, Adam state, activations), the predicted total and measured / predicted, and
the measurement less ``--workspace-mib``: the memory every CUDA process holds once it has run a
GEMM forward and backward, which the model leaves out — the cuBLAS and cuBLASLt workspaces, 66.25 MiB
with torch 2.11 on an H200 (1.25 MiB with ``CUBLAS_WORKSPACE_CONFIG=:0:0``;
``benchmarks/results/gpu_h200/cuda_workspace.txt``).

``nccl``: data-parallel training of a zoo job over ``--ranks`` processes joined exactly as the
executor joins a job's ranks (:func:`policyopt.jobs.plans.init_distributed`: NCCL on CUDA, a TCP
rendezvous on loopback). Rank ``r`` takes GPU ``r mod G`` (G = GPUs visible), so on a machine
with fewer GPUs than ranks two ranks share a GPU, which NCCL refuses ("duplicate GPU"); each
rank's outcome (steps, loss, seconds, or the error) is printed.

    python benchmarks/gpu_checks.py memory PROFILE_DIR [--csv OUT.csv] [--workspace-mib 66.25]
    python benchmarks/gpu_checks.py nccl [--ranks 2] [--steps 50] [--job-type lstm-bs10] [--device cuda|cpu]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import socket
import sys
import time
from pathlib import Path
from queue import Empty
from typing import Any

import pandas as pd

from policyopt.perfmodel.memory import memory_table

MIB = 2.0 ** 20


#: cuBLAS + cuBLASLt workspaces of one process (torch 2.11, H200), measured: see the module docstring.
WORKSPACE_MIB = 66.25


def memory_check(profile_dir: Path, workspace_mib: float = WORKSPACE_MIB) -> pd.DataFrame:
    """Predicted vs measured GPU memory of every GPU row of ``profile_dir/plan_samples.csv``."""
    samples = pd.read_csv(profile_dir / "plan_samples.csv")
    gpu = samples[(samples["gpus"] > 0) & (samples["peak_memory_bytes"] > 0)].reset_index(drop=True)
    if gpu.empty:
        raise SystemExit(f"{profile_dir / 'plan_samples.csv'}: no GPU rows with a measured peak")
    mem = memory_table(gpu)
    plan = ("dp" + gpu["dp"].astype(str) + "-ga" + gpu["ga_steps"].astype(str) + "-gc"
            + gpu["gc"].astype(int).astype(str))
    out = pd.DataFrame({
        "model": gpu["model"], "worker_type": gpu["worker_type"], "plan": plan,
        "params": gpu["params"],
        "weights_mib": mem["mem_weights"] / MIB, "grads_mib": mem["mem_grads"] / MIB,
        "adam_mib": mem["mem_optimizer"] / MIB, "activations_mib": mem["mem_activations"] / MIB,
        "predicted_mib": mem["gpu_bytes"] / MIB, "measured_mib": gpu["peak_memory_bytes"] / MIB,
    })
    out["measured_over_predicted"] = out["measured_mib"] / out["predicted_mib"]
    out["measured_less_workspace_mib"] = out["measured_mib"] - workspace_mib
    out["less_workspace_over_predicted"] = out["measured_less_workspace_mib"] / out["predicted_mib"]
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, job_type: str, steps: int, kind: str, queue: Any) -> None:
    """One data-parallel rank: join the group, train ``steps`` steps, report to ``queue``."""
    import torch

    from policyopt.jobs.plans import ExecutionPlan, init_distributed, train_step, wrap_model
    from policyopt.jobs.zoo import get_job_type

    record: dict[str, Any] = {"rank": rank}
    try:
        if kind == "cuda":
            device = torch.device("cuda", rank % torch.cuda.device_count())
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
        record["device"] = str(device)
        ctx = init_distributed(rank, world, port, device, timeout_s=60.0)
        job = get_job_type(job_type).build(seed=0, device=device)
        model = wrap_model(job.model, ctx)
        plan = ExecutionPlan(world, 1, False)
        losses = []
        start = time.perf_counter()
        for step in range(steps):
            loss, _ = train_step(job, model, job.stream.batch_at(step), plan, ctx)
            losses.append(float(loss))
        if kind == "cuda":
            torch.cuda.synchronize(device)
            record["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        record.update(ok=True, steps=steps, first_loss=losses[0], last_loss=losses[-1],
                      seconds=time.perf_counter() - start,
                      backend=torch.distributed.get_backend() if world > 1 else "none")
    except Exception as exc:  # noqa: BLE001 - the check reports whatever the rank hit
        record.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:600])
    queue.put(record)


def nccl_check(ranks: int, steps: int, job_type: str, kind: str = "cuda") -> list[dict[str, Any]]:
    """Train ``job_type`` data-parallel over ``ranks`` processes on ``kind`` (``cuda``: NCCL,
    ``cpu``: gloo); one record per rank."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, ranks, port, job_type, steps, kind, queue)) for r in range(ranks)]
    for p in procs:
        p.start()
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 180.0
    while len(records) < ranks and time.monotonic() < deadline:
        try:
            records.append(queue.get(timeout=5.0))
        except Empty:  # poll again until the deadline
            if not any(p.is_alive() for p in procs) and queue.empty():
                break
    for p in procs:
        p.join(timeout=10.0)
        if p.is_alive():
            p.kill()
    seen = {r["rank"] for r in records}
    records += [{"rank": r, "ok": False, "error": f"no report (exit code {procs[r].exitcode})"}
                for r in range(ranks) if r not in seen]
    return sorted(records, key=lambda r: r["rank"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="check", required=True)
    m = sub.add_parser("memory", help="memory model vs measured peak of a profile's GPU plan rows")
    m.add_argument("profile_dir", type=Path)
    m.add_argument("--csv", type=Path, help="also write the table here")
    m.add_argument("--workspace-mib", type=float, default=WORKSPACE_MIB,
                   help="per-process CUDA workspace subtracted from each measurement (MiB)")
    n = sub.add_parser("nccl", help="data-parallel training over NCCL ranks")
    n.add_argument("--ranks", type=int, default=2)
    n.add_argument("--steps", type=int, default=50)
    n.add_argument("--job-type", default="lstm-bs10")
    n.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: NCCL, rank r on GPU r mod G; cpu: gloo (the same code path without a GPU)")
    args = parser.parse_args(argv)
    if args.check == "memory":
        table = memory_check(args.profile_dir, args.workspace_mib)
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(table.round(3).to_string(index=False))
        if args.csv:
            table.to_csv(args.csv, index=False)
        return 0
    records = nccl_check(args.ranks, args.steps, args.job_type, args.device)
    for record in records:
        print(json.dumps(record))
    return 0 if all(r.get("ok") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
