"""gpuyard: a multi-tenant GPU cluster platform for deep-learning jobs."""

__version__ = "0.1.0"
