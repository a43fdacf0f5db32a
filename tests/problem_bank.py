"""A bank of small LPs/MILPs with hand-checked optima, primal points and duals (cvxpy-style).

Each entry builds a :class:`policyopt.Model` and states the expected status, objective, primal
values per variable, and (for LPs) row duals per constraint block in HiGHS's convention: the
sensitivity of the optimal objective to the row's active bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from policyopt import IndexSet, Model, Status


@dataclass
class BankProblem:
    name: str
    build: Callable[[], Model]
    status: Status
    objective: float | None = None
    primal: dict[str, list[float]] = field(default_factory=dict)
    duals: dict[str, list[float]] = field(default_factory=dict)
    mip: bool = False


def _lp_basic() -> Model:
    # max x + y  s.t. x + 2y <= 4, 3x + y <= 6  → (1.6, 1.2), 2.8; duals (0.4, 0.2)
    m = Model("lp_basic")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),))
    rows = IndexSet("rows", ["r1", "r2"])
    from policyopt import LinExpr
    A = np.array([[1.0, 2.0], [3.0, 1.0]])
    m.add_constraints(LinExpr.from_matrix(A, v, (rows,)) <= [4.0, 6.0], "caps")
    m.maximize(v.sum())
    return m


def _lp_min_eq() -> Model:
    # min 2x + 3y  s.t. x + y >= 4, x - y == 1 → (2.5, 1.5), 9.5; duals 2.5, -0.5
    from policyopt import LinExpr
    m = Model("lp_min_eq")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),), lower=-np.inf)
    m.add_constraints(LinExpr.from_matrix(np.array([[1.0, 1.0]]), v, (IndexSet("r", ["sum"]),)) >= 4.0, "sum")
    m.add_constraints(LinExpr.from_matrix(np.array([[1.0, -1.0]]), v, (IndexSet("r", ["diff"]),)) == 1.0, "diff")
    m.minimize(v.dot([2.0, 3.0], "i"))
    return m


def _lp_ranged() -> Model:
    # max 3x + 2y  s.t. 1 <= x + y <= 4, 0 <= x <= 3, 0 <= y <= 10 → (3, 1), 11; dual of range 2
    m = Model("lp_ranged")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),), lower=0.0, upper=[3.0, 10.0])
    m.add_constraints(v.sum().between(1.0, 4.0), "range")
    m.maximize(v.dot([3.0, 2.0], "i"))
    return m


def _lp_badly_scaled() -> Model:
    # max t  s.t. t <= 1e-6 * (2e6 x), 1e6 x <= 1e6 (x <= 1) → t = 2, x = 1; steps-vs-fractions scale
    m = Model("lp_badly_scaled")
    x = m.add_variable("x", 0.0, np.inf)
    t = m.add_variable("t", -np.inf, np.inf)
    m.add_constraints((x * 2.0e6) * 1e-6 - t >= 0.0, "thr")
    m.add_constraints(x * 1.0e6 <= 1.0e6, "cap")
    m.maximize(t)
    return m


def _lp_maxmin() -> Model:
    # max min(x, 2y) s.t. x + y <= 3 → x = 2, y = 1, t = 2 (epigraph rewrite)
    m = Model("lp_maxmin")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),))
    m.add_constraints(v.sum() <= 3.0, "cap")
    m.maximize_min(v * np.array([1.0, 2.0]), "t")
    return m


def _lp_infeasible() -> Model:
    m = Model("lp_infeasible")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),), 0.0, 1.0)
    m.add_constraints(v.sum() >= 5.0, "need")
    m.maximize(v.sum())
    return m


def _lp_unbounded() -> Model:
    from policyopt import LinExpr
    m = Model("lp_unbounded")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),))
    m.add_constraints(LinExpr.from_matrix(np.array([[1.0, -1.0]]), v, (IndexSet("r", ["d"]),)) <= 1.0, "d")
    m.maximize(v.dot([1.0, 0.0], "i"))
    return m


def _milp_small() -> Model:
    # max 3x + 2y  s.t. x + y <= 4.5, x <= 2.5, x, y >= 0 integer → (2, 2), 10
    m = Model("milp_small")
    v = m.add_variables("x", (IndexSet("i", ["x", "y"]),), 0.0, [2.5, np.inf], integer=True)
    m.add_constraints(v.sum() <= 4.5, "cap")
    m.maximize(v.dot([3.0, 2.0], "i"))
    return m


def _milp_knapsack() -> Model:
    # 0/1 knapsack: values 10, 13, 7, 8; weights 3, 4, 2, 3; capacity 7 → items 0 and 1 (23)
    # (check: {1,2}=20, {0,2}=17, {0,3}=18, {1,3}=21 with w 7, {2,3}=15, {0,2}... {1,2} w6 → best 23)
    m = Model("milp_knapsack")
    v = m.add_variables("x", (IndexSet("item", list("abcd")),), 0.0, 1.0, integer=True)
    m.add_constraints(v.dot([3.0, 4.0, 2.0, 3.0], "item") <= 7.0, "cap")
    m.maximize(v.dot([10.0, 13.0, 7.0, 8.0], "item"))
    return m


BANK: list[BankProblem] = [
    BankProblem("lp_basic", _lp_basic, Status.OPTIMAL, 2.8, {"x": [1.6, 1.2]}, {"caps": [0.4, 0.2]}),
    BankProblem("lp_min_eq", _lp_min_eq, Status.OPTIMAL, 9.5, {"x": [2.5, 1.5]}, {"sum": [2.5], "diff": [-0.5]}),
    BankProblem("lp_ranged", _lp_ranged, Status.OPTIMAL, 11.0, {"x": [3.0, 1.0]}, {"range": [2.0]}),
    BankProblem("lp_badly_scaled", _lp_badly_scaled, Status.OPTIMAL, 2.0, {"x": [1.0], "t": [2.0]}),
    BankProblem("lp_maxmin", _lp_maxmin, Status.OPTIMAL, 2.0, {"x": [2.0, 1.0], "t": [2.0]}),
    BankProblem("lp_infeasible", _lp_infeasible, Status.INFEASIBLE),
    BankProblem("lp_unbounded", _lp_unbounded, Status.UNBOUNDED),
    BankProblem("milp_small", _milp_small, Status.OPTIMAL, 10.0, {"x": [2.0, 2.0]}, mip=True),
    BankProblem("milp_knapsack", _milp_knapsack, Status.OPTIMAL, 23.0, {"x": [1.0, 1.0, 0.0, 0.0]}, mip=True),
]
