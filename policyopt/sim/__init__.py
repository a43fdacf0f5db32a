"""Trace-driven simulation: traces, the round simulator, metrics and experiments."""
from .simulator import SimConfig, SimResult, Simulator, simulate
from .traces import GENERATORS, TraceJob, gavel_trace, load_trace, save_trace, shockwave_trace

__all__ = ["GENERATORS", "TraceJob", "gavel_trace", "load_trace", "save_trace", "shockwave_trace",
           "SimConfig", "SimResult", "Simulator", "simulate"]
