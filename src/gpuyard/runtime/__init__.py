"""How one task runs on one node: OCI containers through crun or runc.

`executor.ContainerRuntime` is the node-side API; `supervisor` is the per-task process
(`python -m gpuyard.runtime.supervisor TASK_DIR`); `gpus` and `node` describe this machine.
This package file imports nothing on purpose: every task's supervisor imports the package,
and its start-up time is part of every task's start latency (see docs/benchmarks.md).
"""
