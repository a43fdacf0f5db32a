"""Space sharing at scale: the type-level colocation table (``job_type`` + ``colocated_types``), its
vectorized expansion in :class:`AllocationSpace`, pruning, and the interchange format."""
from __future__ import annotations

import numpy as np
import pytest

import policyopt
from policyopt import InputError, Problem
from policyopt.allocation import AllocationSpace, PairPruning


def typed_problem() -> dict:
    jobs = [{"id": f"a{i}", "throughputs": {"v100": 10.0, "k80": 4.0}, "job_type": "A"} for i in range(3)]
    jobs += [{"id": f"b{i}", "throughputs": {"v100": 8.0, "k80": 5.0}, "job_type": "B"} for i in range(2)]
    jobs += [{"id": "c0", "throughputs": {"v100": 6.0, "k80": 6.0}}]  # no job type: never paired by the table
    return {"cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 1}}}, "jobs": jobs,
            "colocated_types": [{"job_types": ["A", "B"], "worker_type": "v100", "throughputs": [7.0, 6.0]},
                                {"job_types": ["A", "A"], "worker_type": "v100", "throughputs": [6.0, 6.0]},
                                {"job_types": ["B", "A"], "worker_type": "k80", "throughputs": [2.0, 1.0]}]}


def explicit_equivalent(d: dict) -> dict:
    """The same data as one explicit colocation per pair of jobs (written out in the test)."""
    ids = {t: [j["id"] for j in d["jobs"] if j.get("job_type") == t] for t in ("A", "B")}
    out = []
    for e in d["colocated_types"]:
        ta, tb = e["job_types"]
        for x in ids[ta]:
            for y in ids[tb]:
                if x < y or ta != tb:
                    out.append({"jobs": [x, y], "worker_type": e["worker_type"], "throughputs": list(e["throughputs"])})
    jobs = [{k: v for k, v in j.items() if k != "job_type"} for j in d["jobs"]]
    return {"cluster": d["cluster"], "jobs": jobs, "colocated": out}


def test_round_trip_and_fields() -> None:
    p = Problem.from_dict(typed_problem())
    assert Problem.from_dict(p.to_dict()) == p
    assert Problem.from_json(p.to_json()) == p
    assert p.job("a0").job_type == "A" and p.job("c0").job_type is None
    assert len(p.colocated_types) == 3
    # a subset of jobs keeps the table
    assert p.with_jobs(p.jobs[:2]).colocated_types == p.colocated_types


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["colocated_types"][0].update(worker_type="tpu"), "colocated_types[A|B@tpu].worker_type"),
    (lambda d: d["colocated_types"][0].update(throughputs=[-1.0, 2.0]), "colocated_types[A|B@v100].throughputs[0]"),
    (lambda d: d["colocated_types"][0].update(throughputs=[float("nan"), 2.0]),
     "colocated_types[A|B@v100].throughputs[0]"),
    (lambda d: d["colocated_types"][0].update(job_types=["A"]), "colocated_types[0].job_types"),
    (lambda d: d["colocated_types"][0].update(extra=1), "colocated_types[0].extra"),
    (lambda d: d["colocated_types"].append({"job_types": ["B", "A"], "worker_type": "v100", "throughputs": [1, 1]}),
     "colocated_types[B|A@v100]"),
    (lambda d: d["jobs"][0].update(job_type=3), "jobs[0].job_type"),  # jobs are named by their place
    (lambda d: d.update(colocated_types="x"), "colocated_types"),
])
def test_bad_type_colocations_name_the_field(mutate, field: str) -> None:  # type: ignore[no-untyped-def]
    d = typed_problem()
    mutate(d)
    with pytest.raises(InputError) as e:
        Problem.from_dict(d)
    assert e.value.field == field


def test_table_expansion_equals_explicit_pairs() -> None:
    d = typed_problem()
    typed = AllocationSpace(Problem.from_dict(d), space_sharing=True, pruning=PairPruning(threshold=0.0))
    expl = AllocationSpace(Problem.from_dict(explicit_equivalent(d)), space_sharing=True,
                           pruning=PairPruning(threshold=0.0))
    assert typed.num_pairs == expl.num_pairs == 6 + 3  # A|B: 3·2 job pairs (V100 and K80 slots), A|A: 3
    np.testing.assert_array_equal(typed.pair_jobs, expl.pair_jobs)
    np.testing.assert_allclose(typed.Tp, expl.Tp)
    for name in ("max_min_fairness", "makespan", "finish_time_fairness"):
        a = policyopt.solve(Problem.from_dict(d), name, space_sharing=True)
        b = policyopt.solve(Problem.from_dict(explicit_equivalent(d)), name, space_sharing=True)
        assert a.objective == pytest.approx(b.objective, rel=1e-9)


def test_orientation_of_table_throughputs() -> None:
    """``["B", "A"]`` on the K80 with throughputs (2, 1): the B job gets 2, the A job 1."""
    s = AllocationSpace(Problem.from_dict(typed_problem()), space_sharing=True, pruning=PairPruning(threshold=0.0))
    k80 = s.configs.position("k80")
    labels = s.jobs.labels
    for k, (a, _b) in enumerate(s.pair_jobs):
        if s.pair_mask[k, k80]:
            ta, tb = s.Tp[k, k80]
            assert (ta, tb) == ((1.0, 2.0) if labels[a].startswith("a") else (2.0, 1.0))


def test_explicit_entry_wins_over_table() -> None:
    d = typed_problem()
    d["colocated"] = [{"jobs": ["b0", "a1"], "worker_type": "v100", "throughputs": [1.5, 9.5]}]
    s = AllocationSpace(Problem.from_dict(d), space_sharing=True, pruning=PairPruning(threshold=0.0))
    a1, b0 = s.jobs.position("a1"), s.jobs.position("b0")
    k = int(np.flatnonzero((s.pair_jobs[:, 0] == a1) & (s.pair_jobs[:, 1] == b0))[0])
    assert tuple(s.Tp[k, s.configs.position("v100")]) == (9.5, 1.5)


def test_exact_threshold_drops_dominated_slots() -> None:
    """A|B on the K80 is normalized 1/4 + 2/5 < 1: dominated by time-slicing, dropped by default."""
    s = AllocationSpace(Problem.from_dict(typed_problem()), space_sharing=True)
    assert not s.pair_mask[:, s.configs.position("k80")].any()
    assert s.num_pairs == 9  # A|B on v100 (0.7 + 0.75 > 1): 6; A|A on v100 (1.2): 3


def test_top_k_is_degree_limited_and_spread(gavel) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    types = gavel.types_with_scale(1)
    jt = rng.choice(types, 300)
    p = gavel.problem(jt, {"v100": 40, "p100": 40, "k80": 40}, colocated="types")
    exact = AllocationSpace(p, space_sharing=True)
    for k in (1, 2, 4):
        s = AllocationSpace(p, space_sharing=True, pruning=PairPruning(top_k=k))
        assert s.num_pairs <= 300 * k
        deg = np.bincount(s.pair_jobs.ravel(), minlength=300)
        can_pair = np.bincount(exact.pair_jobs.ravel(), minlength=300) > 0
        assert np.all(deg[can_pair] >= 1)  # every job that has any partner keeps one
        # every kept pair is an exact-rule pair with the same throughputs
        key = exact.pair_jobs[:, 0] * 300 + exact.pair_jobs[:, 1]
        pos = np.searchsorted(key, s.pair_jobs[:, 0] * 300 + s.pair_jobs[:, 1])
        np.testing.assert_allclose(exact.Tp[pos], s.Tp)
    huge = AllocationSpace(p, space_sharing=True, pruning=PairPruning(top_k=10_000))
    np.testing.assert_array_equal(huge.pair_jobs, exact.pair_jobs)


def test_gavel_types_match_explicit_pairs_and_trace_names(gavel) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(1)
    jt = rng.integers(0, len(gavel.job_types), 30)
    cluster = {"v100": 8, "p100": 8, "k80": 8}
    typed = gavel.problem(jt, cluster, colocated="types")
    expl = gavel.problem(jt, cluster, colocated=True)
    a = AllocationSpace(typed, space_sharing=True)
    b = AllocationSpace(expl, space_sharing=True)
    np.testing.assert_array_equal(a.pair_jobs, b.pair_jobs)
    np.testing.assert_allclose(a.Tp, b.Tp)
    from policyopt.sim.traces import parse_job_type

    for j, t in zip(typed.jobs, jt):
        assert parse_job_type(j.job_type) == gavel.job_types[t]


def test_pruned_objective_between_none_and_exact(gavel) -> None:  # type: ignore[no-untyped-def]
    """Max-min fairness: no sharing ≤ top-k ≤ exact (pruning only removes columns)."""
    rng = np.random.default_rng(2)
    jt = rng.choice(gavel.types_with_scale(1), 48)
    p = gavel.problem(jt, {"v100": 8, "p100": 8, "k80": 8}, colocated="types")
    none = policyopt.solve(p, "max_min_fairness").objective
    exact = policyopt.solve(p, "max_min_fairness", space_sharing=True).objective
    prev = none
    for k in (1, 4, 16):
        v = policyopt.solve(p, "max_min_fairness", space_sharing=True, pair_top_k=k).objective
        assert none - 1e-9 <= v <= exact + 1e-9
        prev = v
    assert exact >= prev - 1e-9


def test_cli_space_sharing_with_type_table(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from policyopt.cli import main

    path = tmp_path / "p.json"
    path.write_text(json.dumps(typed_problem()))
    out = tmp_path / "r.json"
    assert main(["solve", "--policy", "finish_time_fairness", "--input", str(path), "--space-sharing",
                 "--output", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["status"] == "optimal" and res["policy"] == "finish_time_fairness"
    assert {"allocation", "colocated_allocation", "effective_throughputs", "timings"} <= set(res)
