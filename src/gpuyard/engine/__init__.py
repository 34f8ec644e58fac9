"""Engines: where nodes come from and how tasks reach them: `local`, or `ray` (`engine.ray`,
imported only by the server that uses it)."""

from gpuyard.engine.agent import NodeAgent
from gpuyard.engine.base import AgentUnreachable, Engine, NodeUnavailable
from gpuyard.engine.local import LocalEngine

__all__ = ["AgentUnreachable", "Engine", "LocalEngine", "NodeAgent", "NodeUnavailable"]
