"""Published-scale simulation: speed-ups leave results unchanged; ``--scale published`` in small form."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt.mechanism.rounds import Combination, RoundAssignment
from policyopt.placement import ClusterLayout, Placement
from policyopt.placement.consolidate import _result, check_capacity, consolidate


def reference_consolidate(layout: ClusterLayout, assignment: RoundAssignment, previous: Placement | None = None,
                          *, renew: bool = True) -> Placement:
    """The consolidating placer as its docstring states it, by scanning every server per job."""
    combs = list(assignment.combinations)
    check_capacity(layout, combs)
    free = np.ones(layout.num_gpus, bool)
    got: list[np.ndarray | None] = [None] * len(combs)
    order = sorted(range(len(combs)), key=lambda i: -combs[i].num_gpus)
    if renew and previous is not None:
        for i in order:
            for j in combs[i].jobs:
                old = previous.gpus.get(j)
                if old is None or len(old) != combs[i].num_gpus:
                    continue
                ids = np.asarray(old, np.int64)
                if layout.gpu_type[ids[0]] == layout.type_index(combs[i].worker_type) and free[ids].all():
                    free[ids] = False
                    got[i] = ids
                    break
    for i in order:
        if got[i] is not None:
            continue
        g = combs[i].num_gpus
        srv = layout.servers_of(combs[i].worker_type).tolist()
        nfree = {s: int(free[layout.first_gpu[s]:layout.first_gpu[s] + layout.server_size[s]].sum()) for s in srv}
        fitting = [s for s in srv if nfree[s] >= g]
        if fitting:
            s = min(fitting, key=lambda x: (nfree[x], x))
            lo = layout.first_gpu[s]
            ids = lo + np.flatnonzero(free[lo:lo + layout.server_size[s]])[:g]
        else:
            parts, need = [], g
            for s in sorted(srv, key=lambda x: -nfree[x]):
                lo = layout.first_gpu[s]
                avail = lo + np.flatnonzero(free[lo:lo + layout.server_size[s]])
                parts.append(avail[:need])
                need -= min(need, avail.size)
                if need == 0:
                    break
            ids = np.concatenate(parts)
        free[ids] = False
        got[i] = ids
    return _result(layout, combs, got)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["v100", "k80"]), st.sampled_from([1, 1, 1, 2, 4, 8])), max_size=14),
       st.lists(st.tuples(st.sampled_from(["v100", "k80"]), st.sampled_from([1, 1, 2, 4])), max_size=10),
       st.booleans())
def test_consolidate_equals_the_reference_scan(first, second, renew) -> None:
    """Two rounds (the second renews leases from the first): the fast placer equals the plain scan."""
    layout = ClusterLayout.from_counts({"v100": 12, "k80": 8}, {"v100": 4, "k80": 4})

    def fit(spec: list[tuple[str, int]], prefix: str) -> RoundAssignment:
        left = {"v100": 12, "k80": 8}
        combos = []
        for k, (t, g) in enumerate(spec):
            if g <= left[t]:
                left[t] -= g
                combos.append(Combination((f"{prefix}{k}",), t, g))
        return RoundAssignment(tuple(combos), ())

    a1 = fit(first, "j")
    p1, r1 = consolidate(layout, a1), reference_consolidate(layout, a1)
    assert p1.gpus == r1.gpus
    a2 = fit(first[: len(first) // 2] + second, "j")  # some jobs continue (same ids), some are new
    assert consolidate(layout, a2, p1, renew=renew).gpus == reference_consolidate(layout, a2, p1, renew=renew).gpus


def test_simulation_results_identical_with_the_reference_placer(gavel, monkeypatch) -> None:
    """LAS with matching relabels on a contended multi-GPU trace (60 jobs, 24 GPUs; a placer that differs,
    e.g. ``first_fit``, changes 33 JCTs here): every job's JCT, start and migration count are identical
    with the fast placer and with the reference scan."""
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import gavel_trace

    trace = [replace(t, steps=t.steps / 8) for t in gavel_trace(gavel, 60, 5.6, seed=0, multi_gpu=True)]
    cfg = SimConfig(policy="max_min_fairness", until="all", seed=0)
    fast = Simulator("v100=8,p100=8,k80=8", cfg, gavel).run(trace)
    monkeypatch.setattr("policyopt.placement.placers.consolidate", reference_consolidate)
    ref = Simulator("v100=8,p100=8,k80=8", cfg, gavel).run(trace)
    assert fast.metrics["completed"] == 60 and fast.metrics["migrations"] > 0
    for col in ("jct", "first_start", "migrations", "preemptions", "rounds_run"):
        np.testing.assert_array_equal(fast.jobs[col].to_numpy(), ref.jobs[col].to_numpy(), err_msg=col)
    assert fast.metrics["avg_jct"] == ref.metrics["avg_jct"]


def test_published_scale_definition() -> None:
    from policyopt.sim import experiments as ex
    from policyopt.sim.metrics import steady_state_window

    for name, rates in (("las_single", np.linspace(0, 6, 16)[1:]), ("las_multi", np.linspace(0, 3, 11)[1:])):
        exp = ex.scaled(ex.EXPERIMENTS[name], "published")
        assert exp.cluster == "v100=36,p100=36,k80=36" and exp.trace["jobs"] >= 5000
        assert steady_state_window(exp.trace["jobs"], exp.common["window"]) == (4000, 5000)
        assert exp.common["until"] == "window" and exp.seeds == (0, 1, 2)
        np.testing.assert_allclose(exp.rates, rates)
    assert ex.scaled(ex.EXPERIMENTS["las_single"]) == ex.EXPERIMENTS["las_single"]
    # FTF: Gavel's artifact runs it on the continuous-multiple trace (multi-GPU jobs, the multi-GPU sweep)
    ftf = ex.scaled(ex.EXPERIMENTS["ftf"], "published")
    assert ftf.trace["multi_gpu"] is True and not ex.EXPERIMENTS["ftf"].trace["multi_gpu"]
    assert ftf.cluster == "v100=36,p100=36,k80=36" and ftf.common["until"] == "window"
    assert steady_state_window(ftf.trace["jobs"], ftf.common["window"]) == (4000, 5000)
    np.testing.assert_allclose(ftf.rates, np.linspace(0, 3, 11)[1:])
    # makespan: a static trace of 500 jobs (the largest of Gavel's static sweep) on 36 GPUs per type
    mk = ex.scaled(ex.EXPERIMENTS["makespan"], "published")
    assert mk.trace["jobs"] == 500 and mk.trace["static"] and mk.rates == (None,)
    assert mk.cluster == "v100=36,p100=36,k80=36"
    assert mk.common == {**ex.EXPERIMENTS["makespan"].common, "gpus_per_server": 36, **ex.GAVEL_SIMULATOR}
    # one server per type (every job consolidated, as in Gavel's simulator) in every published setup
    for name in ("las_single", "las_multi", "ftf"):
        assert ex.scaled(ex.EXPERIMENTS[name], "published").common["gpus_per_server"] == 36


def test_scale_option_errors() -> None:
    from policyopt.errors import InputError, UnknownNameError
    from policyopt.sim import experiments as ex

    with pytest.raises(UnknownNameError, match="scale"):
        ex.scaled(ex.EXPERIMENTS["las_single"], "huge")
    with pytest.raises(InputError, match="no published-scale setup"):
        ex.scaled(ex.EXPERIMENTS["tesserae"], "published")
    with pytest.raises(InputError, match="jobs"):
        ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=3)
    assert ex.main(["las_single", "--scale", "published", "--rates", "fast"]) == 2


def test_scale_published_small_form_runs_and_writes_as_it_goes(gavel_dir, tmp_path) -> None:
    """``--scale published --jobs 15 --rates 6``: 108 GPUs, window [10, 12), both arms, with two workers;
    the CSV is in task order and equals a one-worker run."""
    from policyopt.sim import experiments as ex

    args = ["las_single", "--scale", "published", "--jobs", "15", "--rates", "6", "--seeds", "0",
            "--output", str(tmp_path / "w2"), "--workers", "2"]
    assert ex.main(args) == 0
    df = pd.read_csv(tmp_path / "w2" / "las_single_published.csv")
    assert list(df["arm"]) == ["aware", "agnostic"] and set(df["rate"]) == {6.0}
    assert (df["num_jobs"] == 15).all() and df["arrivals_cover_window"].dtype == bool
    summary = __import__("json").loads((tmp_path / "w2" / "las_single_published.json").read_text())
    assert summary["scale"] == "published" and summary["cluster"] == "v100=36,p100=36,k80=36"
    assert summary["command"] == __import__("shlex").join(
        ["python", "-m", "policyopt.sim.experiments", "las_single", "--output", str(tmp_path / "w2"), "--seeds", "0",
         "--workers", "2", "--scale", "published", "--jobs", "15", "--rates", "6.0"])
    (tmp_path / "w2" / "las_single_published_bars.png").unlink()
    assert ex.main(["las_single", "--replot", "--scale", "published", "--output", str(tmp_path / "w2")]) == 0
    assert (tmp_path / "w2" / "las_single_published_bars.png").exists()
    one = ex.run_experiment("las_single", tmp_path / "w1", [0], 1, scale="published", jobs=15, rates=[6.0],
                            progress=False)
    assert one["status"] == "ok"
    df1 = pd.read_csv(tmp_path / "w1" / "las_single_published.csv")
    cols = ["arm", "seed", "rate", "avg_jct_hours", "p99_jct_hours", "utilization", "completed"]
    pd.testing.assert_frame_equal(df[cols], df1[cols])


def test_every_posed_job_equals_a_validated_job(gavel, monkeypatch) -> None:
    """After a job's first recompute the simulator builds its Problem entry unchecked: every entry
    of every problem posed equals (fields and their types) the job built through the checked constructor,
    and the columnar view handed to the problem equals the one the problem builds from its jobs."""
    from policyopt.problem import Job, Problem
    from policyopt.sim import simulator as simmod
    from policyopt.sim.traces import gavel_trace

    trace = [replace(t, steps=t.steps / 8)
             for t in gavel_trace(gavel, 40, 5.6, seed=1, multi_gpu=True, slo_factors=(1.2, 2.0, 10.0))]
    posed = []
    real_problem = Problem

    def checking(cluster, members, *args, **kwargs):
        for m in members:
            ref = Job(**m.__dict__)
            assert ref == m and {k: type(v) for k, v in ref.__dict__.items()} == \
                {k: type(v) for k, v in m.__dict__.items()}
            posed.append(m.id)
        posed_problem = real_problem(cluster, members, *args, **kwargs)
        built = real_problem(cluster, members, *args).arrays  # the columnar view the problem builds itself
        handed = posed_problem.arrays
        assert handed.configs == built.configs
        for name in ("ids", "T", "scale", "weights", "steps", "time_since_start"):
            a, b = getattr(handed, name), getattr(built, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        return posed_problem

    monkeypatch.setattr("policyopt.sim.posing.Problem", checking)
    res = simmod.simulate(trace, "v100=8,p100=8,k80=8", table=gavel, policy="finish_time_fairness", seed=0)
    assert res.metrics["completed"] == 40 and len(posed) > 2 * len(set(posed))  # jobs posed repeatedly


def _random_placement(rng: np.random.Generator, layout: ClusterLayout, n: int, prefix: str = "j",
                      keep: Placement | None = None) -> Placement:
    """Up to ``n`` jobs of 1–4 GPUs on random free GPUs of random types (with ``keep``, about half of its
    jobs first keep their type and size), so some jobs are spread and some could be kept."""
    free = {t: rng.permutation(layout.gpus_of(t)).tolist() for t in layout.worker_types}
    specs: list[tuple[str, str, int]] = []
    if keep is not None:
        specs += [(j, keep.worker_type_of(j), len(g)) for j, g in keep.gpus.items() if rng.random() < 0.5]
    specs += [(f"{prefix}{k}", str(rng.choice(layout.worker_types)), int(rng.choice([1, 1, 2, 4])))
              for k in range(n)]
    gpus: dict[str, list[int]] = {}
    for j, t, g in specs:
        if j not in gpus and len(free[t]) >= g:
            gpus[j] = [free[t].pop() for _ in range(g)]
    return Placement.build(layout, gpus)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_relabel_equals_building_the_renamed_placement(seed) -> None:
    """``Placement.relabel`` (no re-validation) equals ``Placement.build`` of the renamed GPUs, spread included."""
    rng = np.random.default_rng(seed)
    layout = ClusterLayout.from_counts({"v100": 8, "k80": 12}, {"v100": 4, "k80": 4})
    p = _random_placement(rng, layout, 12)
    perm = np.arange(layout.num_gpus)
    for t in layout.worker_types:
        ids = layout.gpus_of(t)
        perm[ids] = rng.permutation(ids)
    fast = p.relabel(perm)
    ref = Placement.build(layout, {j: [int(perm[g]) for g in gs] for j, gs in p.gpus.items()}, p.pairs)
    assert dict(fast.gpus) == dict(ref.gpus) and fast.spread == ref.spread and fast.pairs == ref.pairs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_job_exact_relabeling_equals_trying_every_baseline(seed) -> None:
    """Skipping the baselines when the fast mapping keeps every candidate job changes nothing: the
    mapping equals the one chosen after trying the simple rule, the identity and Tesserae's mapping."""
    from policyopt.placement.job_exact import RelabelingModel, job_exact_relabeling, kept_weight
    from policyopt.placement.job_exact import _kept_per_type
    from policyopt.placement.migration import simple_rule_relabeling, tesserae_relabeling

    rng = np.random.default_rng(seed)
    layout = ClusterLayout.from_counts({"v100": 16, "k80": 12}, {"v100": 4, "k80": 4})
    old = _random_placement(rng, layout, 10, "a")
    new = _random_placement(rng, layout, 6, "b", keep=old)
    m = RelabelingModel.build(old, new)
    probe = rng.permutation(layout.num_gpus)
    np.testing.assert_allclose(_kept_per_type(m, probe), kept_weight(old, new, probe, per_type=True))
    base = [simple_rule_relabeling(old, new), np.arange(layout.num_gpus), tesserae_relabeling(old, new)]
    np.testing.assert_array_equal(job_exact_relabeling(old, new), job_exact_relabeling(old, new, baselines=base))


def test_mechanism_arrays_equal_the_dictionary_path(gavel) -> None:
    """The allocation installed from the policy's ``X`` equals, number for number, the one built from
    the result's dictionaries (:func:`mechanism_allocation` + validation), for LAS and its agnostic form,
    with capacities that force the per-type scaling."""
    from policyopt.mechanism.allocation import build_allocation_arrays
    from policyopt.policy import get_policy
    from policyopt.sim.scheduling import mechanism_allocation, mechanism_arrays

    problem = gavel.problem(list(range(0, len(gavel.job_types), 3)), {"v100": 8, "p100": 8, "k80": 8})
    scale = {j.id: j.scale_factor for j in problem.jobs}
    assert max(scale.values()) > 1
    for name in ("max_min_fairness", "max_min_fairness_agnostic"):
        solved = get_policy(name).solve(problem)
        X = solved.X * 1.3  # rows past 1 (solver tolerance, exaggerated): the per-job shrink
        over = replace(solved, X=X, allocation=solved.space.allocation_dict(X))
        for res, counts in ((solved, {"v100": 8, "p100": 8, "k80": 8}), (solved, {"v100": 4, "p100": 2, "k80": 8}),
                            (over, {"v100": 8, "p100": 8, "k80": 8})):
            arr = mechanism_arrays(res, tuple(counts), counts, scale)
            alloc, coloc = mechanism_allocation(res, counts, scale)
            ref = build_allocation_arrays(alloc, coloc, scale, counts)
            assert arr is not None and arr.job_ids == ref.job_ids and arr.combos == ref.combos
            np.testing.assert_array_equal(arr.x, ref.x)
            np.testing.assert_array_equal(arr.scale, ref.scale)
            np.testing.assert_array_equal(arr.members, ref.members)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_plan_that_keeps_every_candidate_is_a_job_exact_optimum(seed) -> None:
    """The simulator's fast path for ``migration="matching"``: when every job that could be kept (same
    type and GPU count in both rounds) holds its old GPUs in the plan, the plan keeps as much as the
    job-exact relabeling does (and jobs that changed type or size cannot be kept by any relabeling)."""
    from policyopt.placement.job_exact import job_exact_relabeling, kept_weight
    from policyopt.sim.loop import _keeps_every_candidate

    rng = np.random.default_rng(seed)
    layout = ClusterLayout.from_counts({"v100": 16, "k80": 12}, {"v100": 4, "k80": 4})
    old = _random_placement(rng, layout, 12, "a")
    stay = {j: g for j, g in old.gpus.items() if rng.random() < 0.6}  # kept in place
    taken = {x for g in stay.values() for x in g}
    gpus: dict[str, list[int]] = {j: list(g) for j, g in stay.items()}
    movers = [j for j in old.gpus if j not in stay and rng.random() < 0.5]  # change type (or size)
    for k, j in enumerate(movers + [f"n{k}" for k in range(4)]):
        t = layout.worker_types[k % 2]
        n = int(rng.choice([1, 2]))
        if j in old.gpus and old.worker_type_of(j) == t and len(old.gpus[j]) == n:
            n = 3 - n  # same type: another size, so the job cannot be kept
        free = [x for x in layout.gpus_of(t).tolist() if x not in taken]
        if len(free) >= n:
            pick = rng.choice(free, n, replace=False).tolist()
            taken.update(pick)
            gpus[j] = pick
    new = Placement.build(layout, gpus)
    assert _keeps_every_candidate(old, new)
    best = job_exact_relabeling(old, new)
    assert kept_weight(old, new, np.arange(layout.num_gpus)) == kept_weight(old, new, best)
    one = Placement.build(layout, {"a": [0]})
    assert not _keeps_every_candidate(one, Placement.build(layout, {"a": [1]}))  # same type and size, moved
    assert _keeps_every_candidate(one, Placement.build(layout, {"a": [0, 1]}))  # grew: cannot be kept
