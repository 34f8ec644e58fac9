"""Tests of GPU discovery (NVML and declared fake GPUs) and of the local node."""
