"""The dependency arrows point down: the core imports no extension, the runtimes do not import each
other at module level, the backends see only the standard form, and looking up a core policy
pulls in nothing heavy.

* **core**: the top-level modules of ``policyopt`` (``policyopt/*.py``) except the command line
  (``cli``, ``cli_reference``: the application on top, which dispatches to every subcommand), plus
  ``policyopt.formulations`` and ``policyopt.solvers``;
* **extensions**: every subpackage of ``policyopt`` (``reconfig``, ``sim``, ``service``, ...);
  they join the core's registries (:mod:`policyopt.extensions`);
* **runtimes**: ``sim``, ``reconfig``, ``executor``, ``service``, ``slurm``.

The graph is read from the source with :mod:`ast` (imports under ``if TYPE_CHECKING:`` are types
only and are skipped).
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"policyopt": ROOT / "policyopt", "policyopt.formulations": ROOT / "formulations",
            "policyopt.solvers": ROOT / "solvers"}
APPLICATION = {"policyopt.cli", "policyopt.cli_reference"}
RUNTIMES = ("sim", "reconfig", "executor", "service", "slurm")
EXTENSIONS = tuple(sorted(p.name for p in PACKAGES["policyopt"].iterdir() if (p / "__init__.py").is_file()))
#: what a solver backend may import from policyopt (it knows only the compiled standard form)
SOLVER_ALLOWED = {"policyopt.errors", "policyopt.result", "policyopt.solver_api", "policyopt.standard_form"}


@dataclass(frozen=True)
class Edge:
    module: str
    target: str
    line: int
    module_level: bool


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(module: str, source: str, is_package: bool = False) -> list[Edge]:
    """Every ``policyopt`` import of ``module`` (absolute names; relative imports resolved), with
    whether it runs at import time (module level, class bodies, module-level ``if``/``try``) or
    only inside a function. ``importlib.import_module("policyopt....")`` calls count too."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    edges: list[Edge] = []

    def visit(node: ast.AST, module_level: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, module_level)
            return
        if isinstance(node, ast.Import):
            edges.extend(Edge(module, a.name, node.lineno, module_level) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base[: len(base) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None or node.level and not node.module:
                edges.extend(Edge(module, f"{target}.{a.name}", node.lineno, module_level) for a in node.names)
            else:
                edges.append(Edge(module, target, node.lineno, module_level))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            edges.append(Edge(module, node.args[0].value, node.lineno, module_level))
        inner = module_level and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    for stmt in ast.parse(source).body:
        visit(stmt, True)
    return [e for e in edges if e.target == "policyopt" or e.target.startswith("policyopt.")]


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for base, directory in PACKAGES.items():
        for path in sorted(directory.rglob("*.py")):
            rel = path.relative_to(directory)
            if base == "policyopt" and rel.parts[0] in ("formulations", "solvers"):
                continue
            parts = [p for p in rel.with_suffix("").parts if p != "__init__"]
            out[".".join([base, *parts])] = (path, path.name == "__init__.py")
    return out


MODULES = _modules()
EDGES = [e for name, (path, pkg) in MODULES.items() for e in imports_of(name, path.read_text(), pkg)]


def _subpackage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in EXTENSIONS else None


def is_core(name: str) -> bool:
    if name in APPLICATION:
        return False
    parts = name.split(".")
    return len(parts) <= 2 and _subpackage(name) is None or parts[1] in ("formulations", "solvers")


def core_violations(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if is_core(e.module) and _subpackage(e.target) is not None]


def runtime_violations(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if e.module_level and _subpackage(e.module) in RUNTIMES
            and _subpackage(e.target) in RUNTIMES and _subpackage(e.target) != _subpackage(e.module)]


def solver_violations(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if e.module.startswith("policyopt.solvers.") and e.target != "policyopt.solvers"
            and not e.target.startswith("policyopt.solvers.") and e.target not in SOLVER_ALLOWED]


def _fmt(edges: list[Edge]) -> str:
    return "\n".join(f"{e.module}:{e.line} imports {e.target}" for e in edges)


def test_the_graph_is_read():
    """The scan sees the package (guards against a vacuous pass after a layout change)."""
    assert {"policyopt.policy", "policyopt.problem", "policyopt.formulations.max_min_fairness",
            "policyopt.solvers.highs", "policyopt.sim.reconfig_sim", "policyopt.reconfig.trace"} <= set(MODULES)
    assert set(RUNTIMES) <= set(EXTENSIONS)
    assert any(e.module == "policyopt.policy" and e.target == "policyopt.formulations" for e in EDGES)
    assert any(e.module == "policyopt.sim.reconfig_sim" and e.target.startswith("policyopt.reconfig")
               and not e.module_level for e in EDGES)


def test_core_imports_no_extension():
    bad = core_violations(EDGES)
    assert not bad, "the core must not import an extension (register with policyopt.extensions instead):\n" + _fmt(bad)


def test_runtimes_do_not_import_each_other_at_module_level():
    bad = runtime_violations(EDGES)
    assert not bad, "runtimes may import each other only inside functions:\n" + _fmt(bad)


def test_solver_backends_know_only_the_standard_form():
    bad = solver_violations(EDGES)
    assert not bad, _fmt(bad)


@pytest.mark.parametrize("module, source, checker", [
    ("policyopt.problem", "from .reconfig.spec import problem_from_dict\n", core_violations),
    ("policyopt.policy", "def f():\n    import importlib\n    importlib.import_module('policyopt.reconfig')\n",
     core_violations),
    ("policyopt.formulations.fifo", "from policyopt.sim import simulate\n", core_violations),
    ("policyopt.sim.reconfig_sim", "from ..reconfig.examples import A100_NODE\n", runtime_violations),
    ("policyopt.reconfig.trace", "try:\n    from policyopt.sim.traces import TraceJob\nexcept ImportError:\n    pass\n",
     runtime_violations),
    ("policyopt.solvers.highs", "from policyopt.allocation import AllocationSpace\n", solver_violations),
])
def test_the_checks_catch_a_new_violation(module, source, checker):
    assert checker(imports_of(module, source))


@pytest.mark.parametrize("module, source, checker", [
    ("policyopt.sim.reconfig_sim", "def f():\n    from ..reconfig.examples import A100_NODE\n", runtime_violations),
    ("policyopt.sim.reconfig_sim",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..reconfig.spec import NodeType\n",
     runtime_violations),
    ("policyopt.problem", "from .extensions import problem_parser\n", core_violations),
])
def test_the_checks_allow_what_is_allowed(module, source, checker):
    assert not checker(imports_of(module, source))


# ------------------------------------------------------------------------- what an import pulls in
HEAVY = ("pandas", "scipy.optimize", "torch", "policyopt.reconfig", "policyopt.sim")


def _import_tree(code: str) -> set[str]:
    """Modules a fresh interpreter holds after ``code``: the ``-X importtime`` tree (import
    statements) together with ``sys.modules`` (which also holds ``importlib.import_module`` imports,
    which ``-X importtime`` does not list)."""
    code += "\nimport sys\nprint('\\n'.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    tree = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "policyopt" in tree and "policyopt" in proc.stdout.split()
    return tree | set(proc.stdout.split())


def test_core_policy_lookup_imports_nothing_heavy():
    names = _import_tree("import policyopt; policyopt.get_policy('max_min_fairness')")
    heavy = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert not heavy, f"heavy modules in the import tree: {heavy}"
    assert "policyopt.formulations.max_min_fairness" in names


def test_extensions_are_discovered_in_a_fresh_interpreter():
    """Without importing ``policyopt.reconfig`` by hand: its policies are listed and found by name,
    a problem with a ``reconfig`` section parses to its kind, the result carries its ``sla_report``."""
    from test_reconfig_spec import small_problem_dict

    code = textwrap.dedent("""
        import json, sys, policyopt
        from policyopt.problem import problem_from_any
        data = json.loads(sys.stdin.read())
        assert "policyopt.reconfig" not in sys.modules
        policy = policyopt.get_policy("rubick_greedy")
        names = [p["name"] for p in policyopt.list_policies()]
        problem = problem_from_any(data)
        res = policyopt.solve(problem, "max_min_fairness").to_dict()
        print(json.dumps({"policy": type(policy).__name__, "names": names, "kind": type(problem).__name__,
                          "sections": sorted(res)}))
    """)
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(small_problem_dict()), capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["policy"] == "RubickGreedy"
    assert {"max_min_fairness", "rubick_greedy", "fluid_srpt"} <= set(got["names"])
    assert got["kind"] == "ReconfigProblem"
    assert "sla_report" in got["sections"]


def test_a_core_problem_does_not_trigger_discovery():
    names = _import_tree(textwrap.dedent("""
        import policyopt
        from policyopt.problem import problem_from_any
        p = problem_from_any({"cluster": {"worker_types": {"v100": 2}},
                              "jobs": [{"id": "a", "throughputs": {"v100": 1.0}}]})
        policyopt.solve(p, "max_min_fairness").to_dict()
    """))
    assert not any(n.startswith("policyopt.reconfig") for n in names)
