"""What a start costs a job, learned from the jobs that finished, and the jobs the round choice
must therefore leave where they run.

Slurm shows a job ``RUNNING`` from the moment its processes start, but a training job first spends
``r`` seconds starting (interpreter, imports, model build, checkpoint load) before its first step;
it pays them at every start, so every stop or move costs it ``r`` seconds of progress. With rounds
of ``L`` seconds and ``r > L`` a schedule that follows a time-shared allocation round by round
spends most of the jobs' time starting (two jobs that take turns every round never finish).

* **Learning r.** A job that finished with ``steps`` steps after ``s_t`` seconds ``RUNNING`` on
  each GPU type ``t`` (speeds ``v_t`` steps/s) and ``n`` starts spent
  ``Σ_t s_t - steps / v̄`` seconds not stepping, with ``v̄ = Σ_t s_t·v_t / Σ_t s_t`` its average
  speed; per start that is ``r = (Σ_t s_t - steps / v̄) / n`` (:func:`startup_per_start`).
  :class:`StartupModel` keeps the mean per job type. Before a type has a finished job its
  estimate is the type's ``startup_seconds`` from the throughput table when the table gives one
  (a prior: the controller charges starts from its first round instead of only after the first
  completion), else the mean over all types learned so far, else (nothing known) one round,
  :data:`UNKNOWN_START_ROUNDS`: a start of unknown cost is taken to cost a round, not nothing
  (taken as free, every start the time-shared allocations ask for is made, and on rounds shorter
  than the jobs' startup the jobs that take turns stop progressing). The learned sums live in the
  state file, so a restarted controller keeps them.
* **Progress.** The steps a job has done are then ``(Σ_t s_t·v_t)·max(1 - n·r / Σ_t s_t, 0)``
  (:func:`steps_done`), not ``Σ_t s_t·v_t``: its starts are taken off its time on every type in
  proportion.
* **Pins** (:func:`pinned_jobs`): a running job stays where it runs this round when
  ``age < PIN_FACTOR·r`` (``age``: seconds since its run began; a start is not undone before the
  run has lasted ``PIN_FACTOR`` times what the start cost, so at least half of each run steps) or
  when ``remaining ≤ min(PIN_FACTOR·r, L)`` (``remaining``: seconds its steps left take on its
  type, ``L`` the round: a job that finishes within this round and within twice what stopping it
  would cost later is not stopped; a longer tail would hold its GPUs for several rounds while
  other jobs wait). With ``r = 0`` nothing is pinned. The round choice keeps a pin only while it
  leaves no (job, type) more than the controller's deviation bound from its due time
  (:func:`policyopt.slurm.schedule.choose_with_pins`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from policyopt.slurm.mapping import ManagedJob
    from policyopt.slurm.slurmcmd import SlurmJob
    from policyopt.slurm.state import StateStore

__all__ = ["PIN_FACTOR", "UNKNOWN_START_ROUNDS", "StartupModel", "learn_startup", "measure_start_cost",
           "pinned_jobs", "running_pins", "startup_per_start", "steps_done"]

#: a run is kept until it has lasted PIN_FACTOR·r, and a job with at most PIN_FACTOR·r seconds of
#: work left is kept to its end
PIN_FACTOR = 2.0
#: rounds a start is taken to cost while nothing is known of it (no prior, no finished job)
UNKNOWN_START_ROUNDS = 1.0


def startup_per_start(seconds: Mapping[str, float], steps: float, throughputs: Mapping[str, float],
                      starts: int) -> float:
    """``r = (Σ_t s_t - steps / v̄) / n`` (module docstring), at least 0; ``n = max(starts, 1)``."""
    total = sum(float(s) for s in seconds.values())
    work = sum(float(s) * float(throughputs.get(t, 0.0)) for t, s in seconds.items())
    if total <= 0 or work <= 0:
        return 0.0
    return max(total - float(steps) * total / work, 0.0) / max(int(starts), 1)


def steps_done(seconds: Mapping[str, float], throughputs: Mapping[str, float], starts: int,
               restart: float) -> float:
    """``(Σ_t s_t·v_t)·max(1 - n·r / Σ_t s_t, 0)``: the steps ``s_t`` seconds on each type gave a
    job that spent ``r`` seconds of each of its ``n`` starts not stepping."""
    total = sum(float(s) for s in seconds.values())
    work = sum(float(s) * float(throughputs.get(t, 0.0)) for t, s in seconds.items())
    if total <= 0:
        return 0.0
    return work * max(1.0 - max(int(starts), 0) * max(float(restart), 0.0) / total, 0.0)


class StartupModel:
    """Mean start cost ``r`` (seconds) per job type, from the jobs that finished."""

    def __init__(self, sums: Mapping[str, tuple[float, int]] | None = None,
                 prior: Mapping[str, float] | None = None) -> None:
        self.sums: dict[str, tuple[float, int]] = {k: (float(v[0]), int(v[1])) for k, v in (sums or {}).items()}
        #: job type -> seconds per start before the type has a finished job (the throughput table's)
        self.prior: dict[str, float] = {k: float(v) for k, v in (prior or {}).items()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None,
                   prior: Mapping[str, float] | None = None) -> "StartupModel":
        return cls({k: (float(v[0]), int(v[1])) for k, v in (state or {}).items()}, prior)

    def to_state(self) -> dict[str, list[float]]:
        return {k: [s, n] for k, (s, n) in sorted(self.sums.items())}

    def observe(self, job_type: str | None, value: float) -> None:
        """Add one finished job's ``r`` (agnostic jobs under the key ``""``)."""
        key = job_type or ""
        s, n = self.sums.get(key, (0.0, 0))
        self.sums[key] = (s + max(float(value), 0.0), n + 1)

    def estimate(self, job_type: str | None, unknown: float = 0.0) -> float:
        """Mean ``r`` of the type, else the type's prior, else the mean over every finished job,
        else ``unknown`` (nothing known yet)."""
        s, n = self.sums.get(job_type or "", (0.0, 0))
        if n:
            return s / n
        if (job_type or "") in self.prior:
            return self.prior[job_type or ""]
        total = sum(v[0] for v in self.sums.values())
        count = sum(v[1] for v in self.sums.values())
        return total / count if count else float(unknown)


def pinned_jobs(running: Mapping[str, str], age: Mapping[str, float], remaining: Mapping[str, float],
                restart: Mapping[str, float], round_length: float = float("inf")) -> dict[str, str]:
    """Job -> GPU type for each running job that must stay where it runs (module docstring):
    ``age[j] < PIN_FACTOR·r_j`` or ``remaining[j] ≤ min(PIN_FACTOR·r_j, L)``, with
    ``r_j = restart[j] > 0`` and ``L = round_length`` (``running``: job -> its type now;
    ``age``/``remaining``: seconds; a job absent from them is not pinned by that rule)."""
    out: dict[str, str] = {}
    for j, t in running.items():
        r = float(restart.get(j, 0.0))
        if r <= 0:
            continue
        young = j in age and float(age[j]) < PIN_FACTOR * r
        ending = j in remaining and float(remaining[j]) <= min(PIN_FACTOR * r, float(round_length))
        if young or ending:
            out[j] = t
    return out


def running_pins(store: "StateStore", running: Mapping[str, str], restart: Mapping[str, float],
                 managed: Mapping[str, "ManagedJob"], by_id: Mapping[str, "SlurmJob"], now: float,
                 round_length: float) -> dict[str, str]:
    """The controller's running jobs that stay where they run (:func:`pinned_jobs`): ``age`` from
    Slurm's start time, ``remaining`` = the steps left (budget minus :func:`steps_done` over the
    seconds the state received) at the speed of the type it runs on (``running``: job -> type)."""
    if not any(restart.get(j, 0.0) > 0 for j in running):
        return {}
    received = store.received()
    age, remaining = {}, {}
    for jid, t in running.items():
        job, mj = by_id[jid], managed[jid]
        if job.start_time > 0:
            age[jid] = now - float(job.start_time)
        if mj.steps is not None and mj.throughputs.get(t, 0.0) > 0:
            left = mj.steps - steps_done(received.get(jid, {}), mj.throughputs, job.restarts + 1, restart[jid])
            remaining[jid] = max(left, 0.0) / mj.throughputs[t]
    return pinned_jobs(running, age, remaining, restart, round_length)


def learn_startup(store: "StateStore", done: Sequence[str], managed: Mapping[str, "ManagedJob"]) -> dict[str, float]:
    """Each job of ``done`` that completed with a step budget adds its ``r`` (its seconds
    ``RUNNING`` beyond what its steps take at the table's speeds, over its starts:
    :func:`startup_per_start`) to the :class:`StartupModel` kept in the state (``startup``).
    Returns job -> the ``r`` learned from it."""
    known = store.known_jobs()
    received = store.received()
    model = StartupModel.from_state(store.get("startup"))
    learned: dict[str, float] = {}
    for jid in done:
        row, mj = known.get(jid), managed.get(jid)
        if row is None or mj is None or mj.steps is None or row["final_state"] != "COMPLETED":
            continue
        r = startup_per_start(received.get(jid, {}), mj.steps, mj.throughputs, int(row["restarts"] or 0) + 1)
        model.observe(mj.job_type, r)
        learned[jid] = r
    if learned:
        store.put("startup", model.to_state())
    return learned


def measure_start_cost(store: "StateStore", ran: Mapping[str, Any]) -> None:
    """Seconds of a round a job placed at its start does not run (requeue, checkpoint, exit,
    Slurm's scheduling pass): the start estimate of the controller's accounting (``ran[job]
    ["started"]``) averaged over the jobs placed last round that started on their type, kept in
    the state (``start_cost``, an exponential average with weight 1/2)."""
    lost = [ran[jid]["started"] for jid, gpu_type in store.get("placed") or []
            if jid in ran and ran[jid]["gpu_type"] == gpu_type and "started" in ran[jid]]
    if lost:
        old = store.get("start_cost")
        new = sum(lost) / len(lost)
        store.put("start_cost", new if old is None else 0.5 * float(old) + 0.5 * new)
