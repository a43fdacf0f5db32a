"""The core's smaller contract items: inaccurate solves have their own status, solver settings
pass through ``policyopt.solve``, ``PolicyResult.to_frame``, figures leave the matplotlib backend
alone, SQLite stores carry a schema version and migrate, one cluster parser and one JSON encoder,
and POP's parallel path never forks this (HiGHS-threaded) process."""
from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import policyopt
from policyopt import InputError, Status
from policyopt.examples import load_example
from policyopt.modeling import Model
from policyopt.policy import get_policy
from policyopt.result import json_default
from policyopt.solver_api import SolverOptions, get_solver
from policyopt.sqlite_schema import migrate, schema_version, split_statements

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small():
    return load_example("small")


# ------------------------------------------------------------------------ optimal_inaccurate
def _max_min_sf(problem):
    pol = get_policy("max_min_fairness")
    space = pol.make_space(problem)
    m = Model()
    X = space.add_allocation(m)
    pol.build(m, space, X)
    return m.compile()


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_cvxpy_inaccurate_solve_has_its_own_status(small):
    """SCS stopped after 20 iterations answers optimal_inaccurate: reported as such, not optimal."""
    pytest.importorskip("cvxpy")
    res = get_solver("cvxpy:SCS").solve(_max_min_sf(small), SolverOptions(extra={"max_iters": 20}))
    assert res.status is Status.OPTIMAL_INACCURATE and not res.ok
    assert res.x is not None  # the point is kept
    full = get_solver("cvxpy:SCS").solve(_max_min_sf(small), SolverOptions(extra={"max_iters": 5000}))
    assert full.status is Status.OPTIMAL and full.ok


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_policy_treats_inaccurate_as_not_proven(small):
    pytest.importorskip("cvxpy")
    cls = type(get_policy("max_min_fairness"))

    class FewIterations(cls):  # type: ignore[misc, valid-type]
        def solver_options(self, sf=None):  # noqa: ANN001, ANN202
            return super().solver_options(sf).with_(extra={"max_iters": 20})

    res = FewIterations(solver="cvxpy:SCS").solve(small)
    assert res.status is Status.OPTIMAL_INACCURATE and not res.ok
    assert res.objective is None and res.message.startswith("optimal_inaccurate: returning")
    assert res.to_dict()["status"] == "optimal_inaccurate"
    assert res.space.check(res.X) == []  # whichever point is returned runs


# ------------------------------------------------------------------------ verbose / threads
@pytest.mark.usefixtures("no_transport_route")  # (the modeling-layer path at this size)
def test_solve_passes_verbose_and_threads_to_the_backend(small, monkeypatch, capfd):
    from policyopt.solvers import highs

    seen = []
    original = highs.HighsModel.__init__

    def spy(self, sf, options):  # noqa: ANN001, ANN202
        original(self, sf, options)
        seen.append((options.verbose, options.threads, self.h.getOptionValue("threads")[1],
                     self.h.getOptionValue("output_flag")[1]))  # (status, value)

    monkeypatch.setattr(highs.HighsModel, "__init__", spy)
    quiet = policyopt.solve(small, "max_min_fairness")
    capfd.readouterr()
    loud = policyopt.solve(small, "max_min_fairness", verbose=True, threads=2)
    log = capfd.readouterr().out
    assert seen[0][:2] == (False, None) and seen[0][3] is False
    assert seen[1] == (True, 2, 2, True)
    assert "HiGHS" in log and len(log.splitlines()) > 3  # HiGHS's own log reached the terminal
    assert loud.objective == pytest.approx(quiet.objective)


@pytest.mark.parametrize("threads", [0, -1, True])
def test_bad_threads_is_an_input_error(small, threads):
    with pytest.raises(InputError) as info:
        policyopt.solve(small, "max_min_fairness", threads=threads)
    assert info.value.field.startswith("options.threads")


# ------------------------------------------------------------------------ to_frame
def test_to_frame_is_jobs_by_configurations(small):
    res = policyopt.solve(small, "max_min_fairness")
    df = res.to_frame()
    assert list(df.index) == list(res.allocation) == [j.id for j in small.jobs]
    assert list(df.columns) == res.space.configs.labels.tolist()
    assert df.index.name == "job" and df.columns.name == "configuration"
    for job, row in res.allocation.items():
        for config, value in row.items():
            assert df.loc[job, config] == value
    assert (df.to_numpy() >= 0).all() and (df.sum(axis=1) <= 1 + 1e-9).all()
    np.testing.assert_allclose(df.to_numpy(), np.asarray(res.X)[:len(small.jobs)], atol=0)


def test_to_frame_without_a_space():
    res = policyopt.PolicyResult("p", "s", Status.OPTIMAL, 1.0, {"a": {"v100": 0.5}, "b": {"k80": 1.0}})
    df = res.to_frame()
    assert df.shape == (2, 2) and df.loc["a", "k80"] == 0.0 and df.loc["b", "k80"] == 1.0


# ------------------------------------------------------------------------ matplotlib backend
def test_figures_leave_the_matplotlib_backend_alone(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        import matplotlib
        matplotlib.use("svg")
        import pandas as pd
        from policyopt.sim.plots import bar_figure, jct_vs_load_figure
        from policyopt.bench.harness import plot_summary
        t = pd.DataFrame({{"policy": ["a", "a", "b", "b"], "rate": [1, 2, 1, 2],
                           "avg_jct_hours": [1.0, 2.0, 1.5, 2.5]}})
        p1 = jct_vs_load_figure(t, r"{tmp_path}/load.png")
        p2 = bar_figure(t, r"{tmp_path}/bars.png", metrics=["avg_jct_hours"])
        s = pd.DataFrame({{"policy": ["x"] * 2, "backend": ["highs"] * 2, "jobs": [10, 20], "total_s": [0.1, 0.2],
                           "solve_s": [0.05, 0.1]}})
        p3 = plot_summary(s, __import__("pathlib").Path(r"{tmp_path}"))
        print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["svg", "False"]
    for name in ("load.png", "bars.png", "bench_x.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------ SQLite schema versions
def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(str(path), isolation_level=None)


def test_split_statements_keeps_semicolons_in_strings_and_triggers():
    script = """CREATE TABLE t (a TEXT DEFAULT 'x;y');
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET a = 'p;q'; END;
    ;"""
    assert len(split_statements(script)) == 2


def test_migrate_applies_each_missing_step_once_and_atomically(tmp_path):
    path = tmp_path / "s.db"
    calls = []
    steps = ["CREATE TABLE IF NOT EXISTS t (a INTEGER)",
             "ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'new'",
             lambda conn: calls.append(conn.execute("SELECT count(*) FROM t").fetchone()[0])]
    conn = _connect(path)
    assert migrate(conn, steps[:1], field="store", value=str(path)) == 1
    conn.execute("INSERT INTO t (a) VALUES (7)")
    assert migrate(conn, steps, field="store", value=str(path)) == 3
    assert schema_version(conn) == 3 and calls == [1]
    assert conn.execute("SELECT a, b FROM t").fetchall() == [(7, "new")]
    assert migrate(conn, steps, field="store", value=str(path)) == 3 and calls == [1]  # nothing left to do

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (x)")
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError):
        migrate(conn, [*steps, broken], field="store", value=str(path))
    assert schema_version(conn) == 3  # the failed step left no trace
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchone() is None
    with pytest.raises(InputError) as info:
        migrate(conn, steps[:2], field="store", value=str(path))
    assert info.value.field == "store" and "newer" in info.value.problem


def test_concurrent_openers_apply_a_step_once(tmp_path):
    path = tmp_path / "c.db"
    _connect(path).execute("PRAGMA journal_mode=WAL")
    applied = []
    lock = threading.Lock()

    def step(conn: sqlite3.Connection) -> None:
        with lock:
            applied.append(1)
        conn.execute("CREATE TABLE t (a)")

    errors = []

    def open_it() -> None:
        try:
            c = sqlite3.connect(str(path), isolation_level=None, timeout=30)
            migrate(c, [step], field="store", value=str(path))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and applied == [1]


def _legacy_file(path: Path, schema: str) -> None:
    """A file as written before schema versions (the original script, user_version 0)."""
    conn = _connect(path)
    conn.executescript(schema)
    conn.close()


def test_service_store_is_versioned_and_adopts_a_legacy_file(tmp_path):
    pytest.importorskip("fastapi")
    from policyopt.service import store as store_mod

    fresh = store_mod.Store(tmp_path / "fresh.db")
    assert schema_version(fresh._conn()) == len(store_mod._MIGRATIONS) >= 1
    legacy = tmp_path / "legacy.db"
    _legacy_file(legacy, store_mod._SCHEMA)
    conn = _connect(legacy)
    conn.execute("INSERT INTO sessions (id, created, version, config, state) VALUES ('s1', 0, 1, '{}', '{}')")
    conn.close()
    s = store_mod.Store(legacy)
    assert schema_version(s._conn()) == len(store_mod._MIGRATIONS)
    assert s._conn().execute("SELECT id FROM sessions").fetchall() == [("s1",)]
    _connect(legacy).execute(f"PRAGMA user_version = {len(store_mod._MIGRATIONS) + 1}")
    with pytest.raises(InputError, match="newer"):
        store_mod.Store(legacy)


def test_executor_state_is_versioned_and_adopts_a_legacy_file(tmp_path):
    from policyopt.executor import state as state_mod

    fresh = state_mod.ExecutorState(tmp_path / "fresh.db")
    assert schema_version(fresh._db) == len(state_mod._MIGRATIONS) >= 1
    legacy = tmp_path / "legacy.db"
    _legacy_file(legacy, state_mod._SCHEMA)
    _connect(legacy).execute("INSERT INTO meta (key, value) VALUES ('round', '3')")
    st = state_mod.ExecutorState(legacy)
    assert schema_version(st._db) == len(state_mod._MIGRATIONS)
    assert st._db.execute("SELECT value FROM meta WHERE key = 'round'").fetchone()[0] == "3"
    st._db.close()
    _connect(legacy).execute(f"PRAGMA user_version = {len(state_mod._MIGRATIONS) + 1}")
    with pytest.raises(InputError) as info:
        state_mod.ExecutorState(legacy)
    assert info.value.field == "state" and "newer" in info.value.problem


def test_slurm_state_is_versioned_and_adopts_a_legacy_file(tmp_path):
    from policyopt.slurm import state as state_mod

    assert state_mod.SCHEMA_VERSION == len(state_mod._MIGRATIONS)
    legacy = tmp_path / "legacy.db"
    _legacy_file(legacy, state_mod._SCHEMA)
    _connect(legacy).execute("INSERT INTO meta (key, value) VALUES ('round', '5')")
    st = state_mod.StateStore(legacy)
    assert schema_version(st.db) == state_mod.SCHEMA_VERSION
    assert st.get("round") == 5
    st.close()
    _connect(legacy).execute(f"PRAGMA user_version = {state_mod.SCHEMA_VERSION + 1}")
    with pytest.raises(InputError, match="newer"):
        state_mod.StateStore(legacy)
    assert schema_version(state_mod.StateStore(tmp_path / "dry.db", in_memory=True).db) == state_mod.SCHEMA_VERSION


# ------------------------------------------------------------------------ one parser, one encoder
def test_one_cluster_parser():
    from policyopt.cluster_counts import parse_cluster
    from policyopt.executor.cluster import parse_cluster as executor_parse
    from policyopt.sim.simulator import parse_cluster as sim_parse

    assert sim_parse is parse_cluster
    for spec in ("v100=36,p100=36,k80=36", "cpu1=1, cpu2=2", {"h100": 1, "cpu1": 0}, {"v100": np.int64(3)}):
        assert executor_parse(spec) == sim_parse(spec)
    for bad, field in [("cpu1", "cluster"), ("cpu1=x", "cluster.cpu1"), ("cpu1=1,cpu1=2", "cluster.cpu1"),
                       ("CPU1=1", "cluster.CPU1"), ("cpu1=0", "cluster"), ("", "cluster"),
                       ({"v100": True}, "cluster.v100")]:
        for parse in (sim_parse, executor_parse):
            with pytest.raises(InputError) as info:
                parse(bad)
            assert info.value.field == field


def test_one_json_encoder():
    from policyopt.sim import simulator

    assert simulator.json_default is json_default
    data = {"a": np.float32(1.5), "b": np.arange(3), "c": Status.OPTIMAL_INACCURATE, "d": np.bool_(True)}
    assert json.loads(json.dumps(data, default=json_default)) == {"a": 1.5, "b": [0, 1, 2], "c": "optimal_inaccurate",
                                                                "d": True}
    with pytest.raises(TypeError):
        json.dumps({"x": object()}, default=json_default)
    defs = [f"{p.relative_to(ROOT)}:{n.name}" for p in sorted((ROOT / "policyopt").rglob("*.py"))
            for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef) and "json_default" in n.name]
    assert defs == ["policyopt/result.py:json_default"]


# ------------------------------------------------------------------------ POP's start method
POP_NO_FORK = textwrap.dedent("""
    import os, sys
    import policyopt
    from policyopt.pop import START_METHOD, pop
    jobs = [{"id": str(i), "throughputs": {"v100": 1.0 + i % 3, "k80": 0.5 + (i % 2)}} for i in range(16)]
    prob = policyopt.Problem.from_dict({"cluster": {"worker_types": {"v100": 4, "k80": 4}}, "jobs": jobs})
    policyopt.solve(prob, "max_min_fairness", threads=2)  # HiGHS's thread pool now runs in this process
    def no_fork():
        raise AssertionError("os.fork called in the HiGHS-threaded parent")
    os.fork = no_fork
    import time
    import importlib
    P = importlib.import_module("policyopt.pop_parallel")  # where the pool and this process take groups
    solve_group = P._solve_group
    def slow(*args):  # this process only: it waits until the pool process has taken a group (the
        # shared counter past this process's own), however long the pool takes to start on a busy machine
        counter, end = P._SHARED[5], time.monotonic() + 240
        while counter.value < 2 and time.monotonic() < end:
            time.sleep(0.05)
        return solve_group(*args)
    P._solve_group = slow
    par = pop("max_min_fairness", 4, 0, max_workers=2).solve(prob)
    P._solve_group = solve_group
    seq = pop("max_min_fairness", 4, 0, parallel=False).solve(prob)
    assert par.extra["pop"]["mode"] == "parallel" and par.extra["pop"]["workers"] == 2, par.extra["pop"]
    assert par.extra["pop"]["worker_seconds"][1] > 0, par.extra["pop"]  # the pool process solved groups
    assert par.allocation == seq.allocation and par.objective == seq.objective
    print(START_METHOD, sys.version_info[:2])
""")


def test_pop_parallel_never_forks_the_threaded_parent():
    """``os.fork`` is disabled in the parent after HiGHS ran there; on Python ≥ 3.12 a fork of a
    multi-threaded process would also print its DeprecationWarning (shown with ``-W always``)."""
    proc = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-c", POP_NO_FORK], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "use of fork()" not in proc.stderr
    assert "pool process died" not in proc.stderr
    assert proc.stdout.split()[-3] in ("forkserver", "spawn")


POP_UNGUARDED_SCRIPT = textwrap.dedent("""
    import policyopt
    from policyopt.pop import pop
    jobs = [{"id": str(i), "throughputs": {"v100": 1.0 + i % 3}} for i in range(8)]
    prob = policyopt.Problem.from_dict({"cluster": {"worker_types": {"v100": 4}}, "jobs": jobs})
    par = pop("max_min_fairness", 2, 0, max_workers=2).solve(prob)
    seq = pop("max_min_fairness", 2, 0, parallel=False).solve(prob)
    assert par.allocation == seq.allocation
    print("same")
""")


def test_pop_in_a_script_without_main_guard_falls_back_to_this_process(tmp_path):
    """The pool processes import the main module; a script without the guard re-runs itself there
    and the pool breaks: the groups are then solved here, with a warning that says why."""
    script = tmp_path / "unguarded.py"
    script.write_text(POP_UNGUARDED_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "same"
    assert "__main__" in proc.stderr and "solved in this process" in proc.stderr


def test_policy_entry_points_scanned_once_then_only_for_unknown_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_policy`` reads the ``policyopt.policies`` entry points once per process (a scan of
    every installed distribution's metadata), and again only for a name that is not registered."""
    from importlib import metadata

    from policyopt.errors import UnknownNameError
    from policyopt.policy import get_policy

    scans: list[str] = []
    real = metadata.entry_points

    def counting(**kw):  # type: ignore[no-untyped-def]
        scans.append(kw.get("group", ""))
        return real(**kw)

    monkeypatch.setattr(metadata, "entry_points", counting)
    get_policy("max_min_fairness")
    first = scans.count("policyopt.policies")
    assert first <= 1
    for _ in range(3):
        get_policy("max_sum_throughput")
    assert scans.count("policyopt.policies") == first
    with pytest.raises(UnknownNameError):
        get_policy("no_such_policy_anywhere")
    assert scans.count("policyopt.policies") == first + 1
