"""The REST API (FastAPI): jobs, nodes, health; OpenAPI at /docs."""

from gpuyard.api.app import create_app

__all__ = ["create_app"]
