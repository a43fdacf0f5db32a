"""Reading from and acting on a Slurm cluster through its own commands.

Jobs come from ``squeue --json`` (Slurm 22.05+: the OpenAPI ``v0.0.38`` job records, which carry
``comment``, ``tres_per_job``/``tres_per_node``, ``gres_detail``, ``nodes``, ``start_time``,
``end_time``, ``restart_cnt``, ``job_state``, ``state_reason``); nodes from ``sinfo -N -o``. Every
change goes through ``scontrol`` (``hold``, ``release``, ``requeuehold``, ``update``); with
``dry_run`` the change is printed and not made. The commands on ``PATH`` and ``SLURM_CONF`` in
the environment locate the cluster.
"""
from __future__ import annotations

import json
import logging
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from policyopt.errors import InputError, PolicyOptError

logger = logging.getLogger(__name__)

__all__ = ["SlurmJob", "SlurmNode", "Slurm", "expand_nodelist", "gpus_requested", "parse_gres",
           "parse_squeue_json", "job_gpus_by_type", "start_estimate", "ACTIVE_STATES", "FINISHED_STATES"]

#: job states in which a job holds (or is about to release) its allocation
ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING"})
#: terminal job states
FINISHED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                             "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT"})

_RANGE = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)")


def expand_nodelist(text: str) -> list[str]:
    """``"k1,v[1-2]"`` -> ``["k1", "v1", "v2"]`` (Slurm hostlist syntax, one bracket per name,
    zero padding kept: ``n[08-10]`` -> ``n08, n09, n10``)."""
    out: list[str] = []
    pos = 0
    text = (text or "").strip()
    while pos < len(text):
        m = _RANGE.match(text, pos)
        if m is None or m.end() == pos:
            raise InputError("nodes", text, "not a Slurm node list")
        prefix, ranges, suffix = m.groups()
        if ranges is None:
            if prefix + suffix:
                out.append(prefix + suffix)
        else:
            for part in ranges.split(","):
                lo, _, hi = part.partition("-")
                width = len(lo)
                for i in range(int(lo), int(hi or lo) + 1):
                    out.append(f"{prefix}{i:0{width}d}{suffix}")
        pos = m.end()
        if pos < len(text) and text[pos] == ",":
            pos += 1
    return out


def parse_gres(text: str) -> dict[str, int]:
    """GPU GRES of a node (``"gpu:v100:2(S:0),nic:1"``) -> ``{"v100": 2}``; an untyped ``gpu:2``
    is keyed ``""``."""
    out: dict[str, int] = {}
    for item in re.split(r",(?![^(]*\))", text or ""):
        item = re.sub(r"\(.*\)$", "", item.strip())
        parts = item.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        gpu_type, count = ("", parts[1]) if len(parts) == 2 else (parts[1], parts[2])
        if count.isdigit():
            out[gpu_type] = out.get(gpu_type, 0) + int(count)
    return out


def _tres_gpus(text: str) -> tuple[int, str | None] | None:
    """``"gres:gpu:v100:2"`` / ``"gres/gpu=2"`` / ``"gpu:2"`` inside a TRES string -> (count, type)."""
    for item in (text or "").split(","):
        item = item.strip().replace("gres/", "gres:").replace("=", ":")
        if item.startswith("gres:"):
            item = item[5:]
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 2 and parts[1].isdigit():
            return int(parts[1]), None
        if len(parts) == 3 and parts[2].isdigit():
            return int(parts[2]), parts[1]
        if len(parts) == 2:
            return 1, parts[1]
    return None


def gpus_requested(record: Mapping[str, Any]) -> tuple[int, str | None]:
    """The GPUs a job asked for (total over its nodes) and the GPU type it pinned, if any:
    ``--gpus``/``--gpus=TYPE:N`` (``tres_per_job``), ``--gres``/``--gpus-per-node`` (``tres_per_node``
    times the node count), ``--gpus-per-task`` (``tres_per_task`` times the task count)."""
    per_job = _tres_gpus(str(record.get("tres_per_job") or ""))
    if per_job:
        return per_job
    nodes = int(record.get("node_count") or 1)
    per_node = _tres_gpus(str(record.get("tres_per_node") or ""))
    if per_node:
        return per_node[0] * nodes, per_node[1]
    per_task = _tres_gpus(str(record.get("tres_per_task") or ""))
    if per_task:
        return per_task[0] * int(record.get("tasks") or 1), per_task[1]
    return 0, None


@dataclass(frozen=True)
class SlurmJob:
    """The fields of a Slurm job record the controller uses (times in Unix seconds, 0 = unset)."""

    job_id: str
    name: str
    user: str
    partition: str
    state: str
    reason: str
    comment: str
    account: str
    qos: str
    nodes: tuple[str, ...]
    gpus: int
    gpu_type: str | None  # a type the job pinned in its own GPU request
    features: str
    submit_time: float
    start_time: float
    end_time: float
    restarts: int
    priority: int

    @property
    def held(self) -> bool:
        """Pending with a user or admin hold (priority 0)."""
        return self.state == "PENDING" and (self.reason in ("JobHeldUser", "JobHeldAdmin") or self.priority == 0)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def _state(value: Any) -> str:
    if isinstance(value, list):  # newer Slurm: a list of flags, the base state first
        return str(value[0]) if value else ""
    return str(value or "")


def _num(value: Any) -> float:
    if isinstance(value, Mapping):  # newer Slurm: {"set": true, "number": N}
        return float(value.get("number") or 0) if value.get("set", True) else 0.0
    return float(value or 0)


def parse_squeue_json(data: Mapping[str, Any]) -> list[SlurmJob]:
    """``squeue --json`` output -> job records (array jobs keep Slurm's ``job_id`` of each task)."""
    jobs = []
    for rec in data.get("jobs", []):
        gpus, gtype = gpus_requested(rec)
        jobs.append(SlurmJob(
            job_id=str(rec["job_id"]), name=str(rec.get("name") or ""), user=str(rec.get("user_name") or ""),
            partition=str(rec.get("partition") or ""), state=_state(rec.get("job_state")),
            reason=str(rec.get("state_reason") or ""), comment=str(rec.get("comment") or ""),
            account=str(rec.get("account") or ""), qos=str(rec.get("qos") or ""),
            nodes=tuple(expand_nodelist(str(rec.get("nodes") or ""))), gpus=gpus, gpu_type=gtype,
            features=str(rec.get("features") or ""), submit_time=_num(rec.get("submit_time")),
            start_time=_num(rec.get("start_time")), end_time=_num(rec.get("end_time")),
            restarts=int(_num(rec.get("restart_cnt"))), priority=int(_num(rec.get("priority")))))
    return jobs


@dataclass(frozen=True)
class SlurmNode:
    """A node of a managed partition: its GPU type (from its GRES), GPU count and state."""

    name: str
    gpu_type: str
    gpus: int
    state: str

    @property
    def usable(self) -> bool:
        """Up and schedulable (not down, drained, draining or failing)."""
        base = self.state.rstrip("*~#!%$@^-")
        return base in ("idle", "mix", "mixed", "alloc", "allocated", "comp", "completing")


class Slurm:
    """Runs Slurm commands. ``dry_run`` prints changes instead of making them; ``log`` receives
    one line per change (default: stdout)."""

    def __init__(self, env: Mapping[str, str] | None = None, *, dry_run: bool = False,
                 log: Callable[[str], None] | None = None, timeout: float = 60.0) -> None:
        self.env = dict(env) if env is not None else None
        self.dry_run = dry_run
        self.log = log or (lambda line: print(line, flush=True))
        self.timeout = timeout

    def _run(self, argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            res = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            raise PolicyOptError(f"{argv[0]}: not found on PATH (is Slurm installed here?)") from None
        except subprocess.TimeoutExpired:
            raise PolicyOptError(f"{' '.join(argv)}: no answer within {self.timeout:.0f} s") from None
        if check and res.returncode != 0:
            raise PolicyOptError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
        return res

    # ------------------------------------------------------------------ reading
    def jobs(self, partitions: Sequence[str]) -> list[SlurmJob]:
        """Every job of ``partitions`` that Slurm still knows (all states). Slurm 22.05's
        ``squeue --json`` ignores ``--partition``/``--states``, so the records are filtered here."""
        res = self._run(["squeue", "--json", "--states=all", "--partition", ",".join(partitions)])
        try:
            data = json.loads(res.stdout)
        except json.JSONDecodeError as exc:
            raise PolicyOptError(f"squeue --json: unreadable output ({exc.msg})") from None
        wanted = set(partitions)
        # a job submitted to several partitions lists them comma-separated
        return [j for j in parse_squeue_json(data) if wanted & set(j.partition.split(","))]

    def nodes(self, partitions: Sequence[str]) -> list[SlurmNode]:
        """The nodes of ``partitions`` with their GPU type and count (one GPU type per node)."""
        res = self._run(["sinfo", "--noheader", "--Node", "--partition", ",".join(partitions),
                         "--format", "%N|%G|%t"])
        nodes: dict[str, SlurmNode] = {}
        for line in res.stdout.splitlines():
            if not line.strip():
                continue
            name, gres, state = line.split("|")
            gpus = parse_gres(gres)
            if len(gpus) > 1:
                raise InputError(f"nodes.{name}.gres", gres, "the controller needs one GPU type per node")
            if not gpus:
                continue
            gpu_type, count = next(iter(gpus.items()))
            if not gpu_type:
                raise InputError(f"nodes.{name}.gres", gres, "GPU GRES must be typed (Gres=gpu:TYPE:N)")
            nodes[name] = SlurmNode(name, gpu_type, count, state.strip())
        return list(nodes.values())

    # ------------------------------------------------------------------ acting
    def _act(self, argv: list[str]) -> bool:
        self.log(("would run: " if self.dry_run else "run: ") + " ".join(argv))
        if self.dry_run:
            return True
        res = self._run(argv, check=False)
        if res.returncode != 0:  # e.g. the job finished in between: reported, not fatal
            logger.warning("policyopt slurm: %s: %s", " ".join(argv), res.stderr.strip())
            return False
        return True

    def hold(self, job_ids: Iterable[str]) -> bool:
        ids = sorted(job_ids, key=int)
        return self._act(["scontrol", "hold", ",".join(ids)]) if ids else True

    def release(self, job_ids: Iterable[str]) -> bool:
        ids = sorted(job_ids, key=int)
        return self._act(["scontrol", "release", ",".join(ids)]) if ids else True

    def requeue_hold(self, job_ids: Iterable[str]) -> bool:
        """Requeue running jobs in the held state: Slurm sends SIGTERM to the job's processes,
        waits ``KillWait`` seconds for them to checkpoint and exit, then SIGKILL."""
        ids = sorted(job_ids, key=int)
        return self._act(["scontrol", "requeuehold", ",".join(ids)]) if ids else True

    def place(self, job_ids: Iterable[str], gpu_type: str) -> bool:
        """Constrain pending jobs to nodes of ``gpu_type`` (node feature) and make them eligible now
        (a requeued job otherwise waits out Slurm's requeue delay): one ``scontrol update`` for all."""
        ids = sorted(job_ids, key=int)
        if not ids:
            return True
        return self._act(["scontrol", "update", f"JobId={','.join(ids)}", f"Features={gpu_type}", "StartTime=now"])


def job_gpus_by_type(job: SlurmJob, node_types: Mapping[str, str]) -> dict[str, int]:
    """GPU type -> GPUs a running job holds, from Slurm's ``gres_detail`` per node when present,
    else its request spread over its nodes' type."""
    types = {node_types[n] for n in job.nodes if n in node_types}
    if not types:
        return {}
    if len(types) == 1:
        return {types.pop(): job.gpus}
    out: dict[str, int] = {}
    share = job.gpus // max(len(job.nodes), 1)
    for n in job.nodes:
        if n in node_types:
            out[node_types[n]] = out.get(node_types[n], 0) + share
    return out


def start_estimate(slurm_start: float, observed: Sequence[float | None] | None = None) -> float:
    """When a run began: Slurm's ``start_time`` is a whole second (the true start lies in
    ``[s, s + 1)``); ``observed = [lo, hi]`` (``hi`` may be ``None``) are the controller's
    ``squeue`` polls around it (still waiting at ``lo``, running at ``hi``). The middle of the
    interval both allow; Slurm's alone where they disagree (``observed`` from an earlier run)."""
    lo, hi = float(slurm_start), float(slurm_start) + 1.0
    if observed:
        a = max(lo, float(observed[0])) if observed[0] is not None else lo
        b = min(hi, float(observed[1])) if len(observed) > 1 and observed[1] is not None else hi
        if a <= b:
            lo, hi = a, b
    return 0.5 * (lo + hi)
