"""Export a policy's compiled standard form (MPS / LP) and import another solver's solution.

How the model is found: the policy is run once with HiGHS behind a :class:`RecordingSolver`, which
keeps a copy of every standard form the policy hands to its backend, at the moment of each solve
(after any in-place updates). A policy that solves **one** LP/MILP on the problem is exportable
as it stands; a policy that solves a sequence (water-filling levels, SJF, finish-time fairness's
parametric LP, a second "fill" LP) has no single file that reproduces it — each stage's bounds
come from the previous stage's solution — so :func:`capture` raises :class:`ExportError` saying
so; one stage can still be written (``stage=K``) for solver benchmarking. POP (``pop_k``) writes
one model per part (each part is solved on its own).

The side file (JSON) maps the model back: for the allocation variable (``X``, or ``Y = τ·X`` in
the Charnes–Cooper form of ``min_cost`` with ``exact_ratio``) each column's row (a job, or a pair
of jobs under space sharing) and configuration; the other variable blocks by name and column
range; the fingerprint of the standard form; and HiGHS's optimum for reference.

Importing (:func:`import_solution`) runs the policy again with a :class:`ReplaySolver` that answers
every load whose standard form has a known fingerprint with the imported column values, so the
result goes through the policy's own extraction (objective in the policy's terms, throughputs,
fallback) exactly as a solve would.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, PolicyOptError
from ..policy import Policy, get_policy
from ..problem import Problem
from ..result import PolicyResult, SolveResult, Status, Timings
from ..solver_api import Feature, LoadedModel, Solver, SolverOptions
from ..standard_form import StandardForm

__all__ = [
    "SIDE_FORMAT",
    "Capture",
    "CapturedPart",
    "ExportError",
    "RecordingSolver",
    "ReplaySolver",
    "capture",
    "capture_stage",
    "export_policy",
    "fingerprint",
    "import_solution",
    "problem_from_side",
    "read_side",
    "read_solution",
    "side_path_for",
    "write_model",
]

#: ``format`` field of the side file (its ``version`` is 1)
SIDE_FORMAT = "policyopt-export"
#: largest violation (scaled rows, column bounds) an imported solution may have and count as feasible
IMPORT_FEASIBILITY_TOL = 1e-6


class ExportError(PolicyOptError):
    """The policy's problem cannot be written as one model file (the message says why)."""


def fingerprint(sf: StandardForm) -> str:
    """SHA-256 of a standard form's data (sense, costs, offset, bounds, integrality, the CSC matrix)."""
    h = hashlib.sha256()
    h.update(sf.sense.encode())
    h.update(np.float64(sf.offset).tobytes())
    A = sf.A.tocsc()
    A.sort_indices()
    for arr, dt in ((sf.c, np.float64), (sf.col_lower, np.float64), (sf.col_upper, np.float64),
                    (sf.integrality, np.int8), (sf.row_lower, np.float64), (sf.row_upper, np.float64),
                    (A.indptr, np.int64), (A.indices, np.int64), (A.data, np.float64)):
        a = np.ascontiguousarray(arr, dtype=dt)
        h.update(np.int64(a.size).tobytes())
        h.update(a.tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------- recording
@dataclass
class Capture:
    """One solve a policy asked of its backend: the standard form at that moment and the answer."""

    sf: StandardForm
    load: int           # which ``load`` call (0, 1, ...)
    after_updates: bool  # solved after in-place updates of the loaded model
    status: Status
    objective: float | None
    x: np.ndarray | None


class _RecordingModel(LoadedModel):
    """Delegates to the real backend's loaded model; snapshots the form at every solve."""

    def __init__(self, inner: LoadedModel, owner: RecordingSolver, load: int) -> None:
        self.__dict__["_inner"] = inner
        self.__dict__["_owner"] = owner
        self.__dict__["_load"] = load
        self.__dict__["_updated"] = False
        self.__dict__["_solves"] = 0

    # the policy code reads/writes these on the model it got back: keep them on the real one
    def __getattr__(self, item: str) -> Any:
        return getattr(self.__dict__["_inner"], item)

    def __setattr__(self, key: str, value: Any) -> None:
        setattr(self._inner, key, value)

    def _touch(self) -> None:
        self.__dict__["_updated"] = True

    def set_costs(self, cols: np.ndarray, costs: np.ndarray) -> None:
        self._touch()
        self._inner.set_costs(cols, costs)

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self._touch()
        self._inner.set_col_bounds(cols, lower, upper)

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self._touch()
        self._inner.set_row_bounds(rows, lower, upper)

    def set_sense(self, sense: str) -> None:
        self._touch()
        self._inner.set_sense(sense)

    def add_rows(self, A_rows: Any, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        self._touch()
        return self._inner.add_rows(A_rows, lower, upper)

    def get_basis(self) -> tuple[np.ndarray, np.ndarray] | None:
        return self._inner.get_basis()

    def has_basis(self) -> bool:
        return self._inner.has_basis()

    def basis_reader(self) -> Any:
        return self._inner.basis_reader()

    def set_basis(self, col_status: np.ndarray, row_status: np.ndarray) -> None:
        self._inner.set_basis(col_status, row_status)

    def set_algorithm(self, algorithm: str) -> None:
        self._inner.set_algorithm(algorithm)

    def use_warm_primal(self) -> bool:
        return self._inner.use_warm_primal()

    @property
    def stall_retries(self) -> int:  # type: ignore[override]  # the real model's count (a class default here)
        return self._inner.stall_retries

    def clear_warm_start(self) -> None:
        self._inner.clear_warm_start()

    def set_presolve(self, enabled: bool) -> None:
        self._inner.set_presolve(enabled)

    def answer_duals(self) -> np.ndarray | None:
        return self._inner.answer_duals()

    def set_dual_start(self, row_duals: np.ndarray) -> bool:
        return self._inner.set_dual_start(row_duals)

    def prefers_rebuild(self) -> bool:
        return self._inner.prefers_rebuild()

    def solve(self) -> SolveResult:
        snap = self._inner.sf.copy()
        if self._owner.stop_at is not None and len(self._owner.captures) == self._owner.stop_at:
            self._owner.captures.append(Capture(snap, self._load, self.__dict__["_solves"] > 0 or
                                                self.__dict__["_updated"], Status.ERROR, None, None))
            raise _StopCapture
        res = self._inner.solve()
        updated = self.__dict__["_updated"] or self.__dict__["_solves"] > 0
        self.__dict__["_solves"] += 1
        self._owner.captures.append(Capture(snap, self._load, updated, res.status, res.objective,
                                            None if res.x is None else res.x.copy()))
        return res

    def resolve(self) -> SolveResult:
        return LoadedModel.resolve(self)


class _StopCapture(BaseException):  # not an error: passes any `except Exception` in a policy
    """Raised inside the policy once the wanted stage is recorded (it is not solved)."""


class RecordingSolver(Solver):
    """A backend that hands every model to ``inner`` and records it (:class:`Capture`). With
    ``stop_at=K`` the K-th solve is recorded but not run, and the policy is stopped there."""

    name = "recording"
    features = Feature.LP | Feature.MILP | Feature.DUALS | Feature.WARM_START | Feature.TIME_LIMIT

    def __init__(self, inner: Solver, stop_at: int | None = None) -> None:
        self.inner = inner
        self.stop_at = stop_at
        self.name = inner.name  # type: ignore[misc]  # policies may look at the backend's name
        self.features = inner.features  # type: ignore[misc]
        self.captures: list[Capture] = []
        self._loads = 0

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        model = _RecordingModel(self.inner.load(sf, options), self, self._loads)
        self._loads += 1
        return model


class _ReplayModel(LoadedModel):
    def __init__(self, sf: StandardForm, options: SolverOptions, owner: ReplaySolver) -> None:
        super().__init__(sf.copy(), options)
        self.owner = owner

    def solve(self) -> SolveResult:
        t0 = time.perf_counter()
        key = fingerprint(self.sf)
        x = self.owner.solutions.get(key)
        if x is None:
            raise ExportError(f"the policy built a model (fingerprint {key[:12]}…) that is not the exported one: "
                              "the problem, policy or options differ from the export's side file")
        self.owner.used.add(key)
        viol = self.sf.violation(x)
        ok = viol <= IMPORT_FEASIBILITY_TOL and (not self.sf.is_mip or bool(np.all(
            np.abs(x[self.sf.integrality > 0] - np.round(x[self.sf.integrality > 0])) <= IMPORT_FEASIBILITY_TOL)))
        obj = self.sf.objective_value(x)
        self.owner.reports.append({"fingerprint": key, "objective": obj, "max_violation": viol, "feasible": ok})
        msg = "" if ok else (f"imported solution violates the model by {viol:.3g} "
                             f"(> {IMPORT_FEASIBILITY_TOL:g}, scaled rows)")
        return SolveResult(Status.OPTIMAL if ok else Status.ERROR, obj, x.copy(), solver=self.owner.label,
                           message=msg, timings=Timings(solve=time.perf_counter() - t0))


class ReplaySolver(Solver):
    """A backend whose answers are imported solutions, keyed by the standard form's fingerprint."""

    name = "import"
    features = Feature.LP | Feature.MILP | Feature.TIME_LIMIT

    def __init__(self, solutions: dict[str, np.ndarray], label: str = "import") -> None:
        self.solutions = solutions
        self.label = label
        self.used: set[str] = set()
        self.reports: list[dict[str, Any]] = []

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        return _ReplayModel(sf, options, self)


# ---------------------------------------------------------------------------------------- capture
@dataclass
class CapturedPart:
    """The solves of one (sub-)problem: ``part`` is the POP group (``None`` without POP)."""

    part: int | None
    problem: Problem
    result: PolicyResult
    captures: list[Capture]


def _with_solver(policy: Policy, solver: Solver) -> Policy:
    pol = copy.copy(policy)
    pol.config = dict(policy.config)
    pol.config["solver"] = solver
    return pol


def _parts(policy: Policy, problem: Problem, pop_k: int | None, seed: int
           ) -> Iterator[tuple[int | None, Problem, Policy]]:
    """``(part, problem, policy)`` for the whole problem, or for each POP group the way POP solves it."""
    if pop_k is None:
        yield None, problem, policy
        return
    from ..pop import pop, pop_adapter

    pp = pop(policy, k=pop_k, seed=seed, parallel=False)  # validates pop_combine
    adapter = pop_adapter(problem)
    part = pp.state.update(problem, adapter)
    members = part.members(problem)
    for p in range(part.k):
        if not members[p].size:
            continue
        sub = adapter.sub_problem(part, members[p], p)
        pol = copy.copy(policy)
        pol.config = dict(policy.config)
        if type(adapter).overrides_space:
            pol.make_space = functools.partial(type(adapter).make_space, pol, adapter.context())  # type: ignore[method-assign]
        yield p, sub, pol


def capture(policy: Policy, problem: Problem, pop_k: int | None = None, seed: int = 0) -> list[CapturedPart]:
    """Solve ``problem`` with ``policy`` (its own backend, HiGHS by default) recording every model
    handed to the backend; one :class:`CapturedPart` per POP group (or one for the whole problem)."""
    out = []
    for p, sub, pol in _parts(policy, problem, pop_k, seed):
        rec = RecordingSolver(pol.get_solver(None))
        res = _with_solver(pol, rec).solve(sub)
        out.append(CapturedPart(p, sub, res, rec.captures))
    return out


def capture_stage(policy: Policy, problem: Problem, stage: int = 0, or_last: bool = False
                  ) -> tuple[StandardForm, int]:
    """The ``stage``-th model ``policy`` hands its backend on ``problem`` (earlier stages solved by the
    policy's backend, HiGHS by default; the wanted one only built) and its stage number. When the
    policy solves fewer models: the last one with ``or_last``, else :class:`ExportError`."""
    rec = RecordingSolver(policy.get_solver(None), stop_at=stage)
    try:
        _with_solver(policy, rec).solve(problem)
    except _StopCapture:
        return rec.captures[stage].sf, stage
    if or_last and rec.captures:
        return rec.captures[-1].sf, len(rec.captures) - 1
    raise ExportError(f"policy {policy.name!r} solves {len(rec.captures)} models on this problem, "
                      f"so it has no stage {stage}")


def _stage(policy_name: str, part: CapturedPart, stage: int | None) -> Capture:
    caps = part.captures
    where = "" if part.part is None else f" (POP part {part.part})"
    if not caps:
        raise ExportError(f"policy {policy_name!r} solves no LP or MILP on this problem{where} "
                          "(a closed-form or combinatorial policy): there is no model to export")
    if stage is None:
        if len(caps) > 1:
            raise ExportError(
                f"policy {policy_name!r} solves a sequence of {len(caps)} LPs/MILPs on this problem{where}: each "
                "stage's bounds or costs come from the previous stage's solution, so no single model file "
                f"reproduces the policy; write one stage with --stage K (0 ≤ K < {len(caps)}) for solver "
                "benchmarking (import-solution needs a single-model policy)")
        return caps[0]
    if not 0 <= stage < len(caps):
        raise InputError("--stage", stage, f"must be in 0..{len(caps) - 1}: policy {policy_name!r} solves "
                                           f"{len(caps)} models on this problem{where}")
    return caps[stage]


# ---------------------------------------------------------------------------------------- writing
def write_model(sf: StandardForm, path: str | Path, fmt: str) -> None:
    """Write ``sf`` as MPS (free format) or CPLEX LP with HiGHS's writer; columns ``c0, c1, …``,
    rows ``r0, r1, …`` (HiGHS's default names); the objective offset is kept (MPS: RHS of the
    objective row)."""
    import highspy

    from ..solver_api import get_solver

    if fmt not in ("mps", "lp"):
        raise InputError("--format", fmt, "must be mps or lp")
    model: Any = get_solver("highs").load(sf, SolverOptions())
    path = Path(path)
    # HiGHS picks the writer from the file name: write under the right suffix, then move into place
    fd, tmp = tempfile.mkstemp(suffix=f".{fmt}", dir=path.parent if str(path.parent) else None)
    os.close(fd)
    try:
        status = model.h.writeModel(tmp)
        if status == highspy.HighsStatus.kError:
            raise ExportError(f"HiGHS could not write {fmt.upper()} to {path}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _allocation_map(sf: StandardForm, result: PolicyResult) -> dict[str, Any] | None:
    """Columns of the allocation variable → (rows of the space, configuration)."""
    space = result.space
    if space is None:
        return None
    n_slots = int(np.count_nonzero(space.mask))
    for name, how in (("X", "X"), ("Y", "X = Y / tau")):
        rng = sf.col_blocks.get(name)
        if rng is None or rng[1] - rng[0] != n_slots:
            continue
        rr, cc = np.nonzero(space.mask)
        jobs = space.jobs.labels.tolist()
        n_jobs = len(jobs)
        rows = [[j] for j in jobs] + [[jobs[a], jobs[b]] for a, b in space.pair_jobs.tolist()]
        return {"variable": name, "first_column": int(rng[0]), "value": how,
                "rows": rows[: len(space.rows)], "configurations": space.configs.labels.tolist(),
                "row": rr.tolist(), "configuration": cc.tolist(),
                "note": f"column first_column + k is the slot (rows[row[k]], configurations[configuration[k]]); "
                        f"rows 0..{n_jobs - 1} are single jobs, later rows pairs sharing workers"}
    return None


def _problem_digest(problem: Problem) -> str:
    return hashlib.sha256(problem.to_json().encode()).hexdigest()


def export_policy(policy_name: str, problem: Problem, output: str | Path, fmt: str = "mps",
                  options: dict[str, Any] | None = None, pop_k: int | None = None, seed: int = 0,
                  stage: int | None = None, source: dict[str, str] | None = None) -> list[tuple[Path, Path]]:
    """Write the model(s) ``policy_name`` solves on ``problem`` to ``output`` (POP: ``output`` with
    ``.partP`` before the suffix, one per part) and a side file ``<model>.json`` each. Returns the
    (model, side file) paths. ``source`` (``{"example": NAME}`` or ``{"input": PATH}``) is recorded so
    that ``import-solution`` finds the problem again."""
    options = dict(options or {})
    policy = get_policy(policy_name, **options)
    parts = capture(policy, problem, pop_k, seed)
    chosen = [(part, _stage(policy_name, part, stage)) for part in parts]
    output = Path(output)
    written = []
    for part, cap in chosen:
        path = output if part.part is None else output.with_name(f"{output.stem}.part{part.part}{output.suffix}")
        write_model(cap.sf, path, fmt)
        side = {
            "format": SIDE_FORMAT, "version": 1, "model_file": path.name, "model_format": fmt,
            "policy": policy_name, "options": {k: v for k, v in options.items()},
            "pop": None if part.part is None else {"k": pop_k, "seed": seed, "part": part.part},
            "stage": stage, "stages": len(part.captures), "problem_sha256": _problem_digest(problem),
            "problem_source": source or {},
            "standard_form_sha256": fingerprint(cap.sf),
            "sense": cap.sf.sense, "objective_offset": cap.sf.offset, "num_cols": cap.sf.num_cols,
            "num_rows": cap.sf.num_rows, "nnz": cap.sf.nnz, "is_mip": cap.sf.is_mip,
            "column_names": "c<index>", "row_names": "r<index>",
            "rows_scaled": "row i of the file is row_scale[i] × the model's row i (a power of two); "
                           "duals of the file's rows are in that scale",
            "variables": {k: list(v) for k, v in cap.sf.col_blocks.items()},
            "constraints": {k: list(v) for k, v in cap.sf.row_blocks.items()},
            "reference": {"solver": "highs", "status": cap.status.value, "objective": cap.objective},
            "allocation_columns": (_allocation_map(cap.sf, part.result)
                                   if stage is None or len(part.captures) == 1 else None),
        }
        side_path = path.with_name(path.name + ".json")
        side_path.write_text(json.dumps(side))
        written.append((path, side_path))
    return written


# ---------------------------------------------------------------------------------------- importing
_NAME_VALUE = re.compile(r"^\s*(?:\d+\s+)?c(\d+)\s+([-+0-9.eEinfINFnaN]+)")


def read_solution(path: str | Path, num_cols: int) -> np.ndarray:
    """Column values from a solver's solution file, by HiGHS's column names ``c<index>``: lines
    ``c12 0.5`` (HiGHS raw solution files, Gurobi/SCIP ``.sol``, ``name value`` lists) or
    ``12 c12 0.5 …`` (CBC). Reading stops at a dual section (``# Dual`` in HiGHS files). Columns
    not listed are 0 (solution files commonly omit zeros). A JSON file may instead give
    ``{"x": [values…]}``."""
    text = Path(path).read_text()
    stripped = text.lstrip()
    if stripped.startswith("{"):
        data = json.loads(text)
        x = np.asarray(data.get("x", []), dtype=np.float64)
        if x.shape != (num_cols,):
            raise InputError("--solution", str(path), f"field 'x' must list {num_cols} column values")
        return x
    x = np.zeros(num_cols)
    seen = 0
    for line in text.splitlines():
        if line.startswith("# Dual"):
            break
        m = _NAME_VALUE.match(line)
        if not m:
            continue
        j = int(m.group(1))
        if j >= num_cols:
            raise InputError("--solution", str(path), f"column c{j} does not exist (the model has {num_cols})")
        try:
            x[j] = float(m.group(2))
        except ValueError:
            raise InputError("--solution", str(path), f"value {m.group(2)!r} of c{j} is not a number") from None
        seen += 1
    if seen == 0 and num_cols:
        raise InputError("--solution", str(path), "no column values found (expected lines 'c<index> <value>')")
    return x


def side_path_for(path: str | Path) -> Path:
    """The side file of an exported model: ``MODEL.json`` (a side file is returned as it is)."""
    p = Path(path)
    return p if p.suffix == ".json" else p.with_name(p.name + ".json")


def read_side(path: str | Path) -> dict[str, Any]:
    """An export's side file (from the model file's or the side file's path), checked."""
    sp_ = side_path_for(path)
    try:
        side = json.loads(sp_.read_text())
    except FileNotFoundError:
        raise InputError("--problem", str(path), f"no side file {sp_} (written by policyopt export)") from None
    except json.JSONDecodeError as exc:
        raise InputError("--problem", str(sp_), f"side file is not JSON: {exc}") from None
    if not isinstance(side, dict) or side.get("format") != SIDE_FORMAT:
        raise InputError("--problem", str(sp_), f"not a policyopt export side file (format must be {SIDE_FORMAT!r})")
    if side.get("stage") is not None and side.get("stages", 1) != 1:
        raise InputError("--problem", str(sp_), "an exported stage of a multi-stage policy cannot be imported "
                                                "as a policy result (the later stages depend on its solution)")
    return side


def problem_from_side(side: dict[str, Any]) -> Problem:
    """The problem an export was made from (the built-in example or the input file it names)."""
    src = side.get("problem_source") or {}
    if "example" in src:
        from ..examples import load_example

        return load_example(src["example"])
    if "input" in src:
        return Problem.from_json(Path(src["input"]))
    raise InputError("--input", None,
                     "the side file does not say where its problem came from: give --input or --example")


def import_solution(models: list[str | Path], solutions: list[str | Path], problem: Problem | None = None
                    ) -> PolicyResult:
    """A :class:`PolicyResult` from solver solution files, one per exported model (POP: one per part;
    ``models`` are the model or side files in the same order). The problem defaults to the one the
    export names. The policy is re-run with a :class:`ReplaySolver`, so the result is what ``policyopt
    solve`` returns had the solver produced these values; ``extra["import"]`` reports each model's
    objective, largest violation and relative gap to HiGHS's reference optimum."""
    if not solutions or len(models) != len(solutions):
        raise InputError("--solution", [str(s) for s in solutions],
                         f"give one solution file per --problem ({len(models)} given)")
    sides = [read_side(m) for m in models]
    first = sides[0]
    if problem is None:
        problem = problem_from_side(first)
    digest = _problem_digest(problem)
    for side, path in zip(sides, models):
        if side["problem_sha256"] != digest:
            raise InputError("--problem", str(path), "was exported from a different problem (content differs)")
        pop_key = (side["pop"] or {}).get("k"), (side["pop"] or {}).get("seed")
        if (side["policy"], side["options"], pop_key) != (
                first["policy"], first["options"], ((first["pop"] or {}).get("k"), (first["pop"] or {}).get("seed"))):
            raise InputError("--problem", str(path), "comes from a different export (policy, options or POP)")
    sols = {side["standard_form_sha256"]: read_solution(p, int(side["num_cols"])) for side, p in zip(sides, solutions)}
    if len(sols) != len(sides):
        raise InputError("--problem", [str(m) for m in models], "the same model is given twice")
    replay = ReplaySolver(sols, label=f"import:{Path(solutions[0]).name}")
    policy = get_policy(first["policy"], **first["options"])
    policy.config["solver"] = replay
    if first["pop"] is not None:
        from ..pop import pop

        policy = pop(policy, k=int(first["pop"]["k"]), seed=int(first["pop"]["seed"]), parallel=False)
    res = policy.solve(problem)
    if set(sols) - replay.used:
        raise ExportError(f"{len(set(sols) - replay.used)} of the given solutions were not used: the policy did not "
                          "build those models on this problem (a POP part left out, or a different export)")
    refs = {s["standard_form_sha256"]: s["reference"]["objective"] for s in sides}
    for r in replay.reports:
        ref = refs.get(r["fingerprint"])
        r["reference_objective"] = ref
        r["rel_gap"] = abs(r["objective"] - ref) / max(abs(ref), 1e-12) if ref is not None else None
    res.extra["import"] = replay.reports
    return res
