"""`python -m gpuyard`: the same as the `gpuyard` command."""

from gpuyard.entry import main

main()
