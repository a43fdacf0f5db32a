"""Trace-driven simulation: traces, the round simulator, metrics and experiments.

The reconfiguration-aware simulation (``--generator transformers``) lives in
:mod:`policyopt.sim.reconfig_sim`; its names are exported lazily here. It uses
:mod:`policyopt.reconfig` only inside functions (the runtimes never import each other at module
level; tests/test_import_graph.py).
"""
from .._lazy import lazy_exports
from .simulator import SimConfig, SimResult, Simulator, simulate
from .traces import GENERATORS, TraceJob, gavel_trace, load_trace, save_trace, shockwave_trace

__all__ = ["GENERATORS", "TraceJob", "gavel_trace", "load_trace", "save_trace", "shockwave_trace",
           "SimConfig", "SimResult", "Simulator", "simulate", "ReconfigSimConfig", "ReconfigSimulator",
           "simulate_reconfig"]
_LAZY = ("ReconfigSimConfig", "ReconfigSimulator", "simulate_reconfig")


__getattr__, __dir__ = lazy_exports(__name__, {name: ".reconfig_sim" for name in _LAZY}, globals())
