"""Trace loaders and a discrete-event simulator around the unchanged `scheduler`.

trace = load_philly(default_trace_dir(), "demand:0.7")
result = simulate(trace, SimConfig(policy="las"))
summary = summarize(result)
"""

from gpuyard.sim.engine import SimConfig, SimJob, SimResult, Simulator, simulate
from gpuyard.sim.traces import Trace, TraceJob, default_trace_dir, load_csv, load_philly

__all__ = [
    "SimConfig",
    "SimJob",
    "SimResult",
    "Simulator",
    "Trace",
    "TraceJob",
    "default_trace_dir",
    "load_csv",
    "load_philly",
    "simulate",
]
