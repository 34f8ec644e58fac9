"""Engines: where nodes come from and how tasks reach them (local now; Ray later)."""

from gpuyard.engine.agent import NodeAgent
from gpuyard.engine.base import Engine, NodeUnavailable
from gpuyard.engine.local import LocalEngine

__all__ = ["Engine", "LocalEngine", "NodeAgent", "NodeUnavailable"]
