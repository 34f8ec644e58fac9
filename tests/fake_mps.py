"""A fake `nvidia-cuda-mps-control` for tests: a shell script that records what it is asked.

Like the real one, `-d` returns at once (the real one forks a daemon) after creating the
daemon's `control` socket stand-in and `nvidia-cuda-mps-control.pid` in
$CUDA_MPS_PIPE_DIRECTORY; commands arrive on stdin (`quit` removes them). Each call appends
one line to the record: `<-d | stdin command> gpu=<CUDA_VISIBLE_DEVICES> pipe=<pipe dir>
log=<log dir>`. `fail=True` makes `-d` fail like a daemon that cannot start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCRIPT = """#!/bin/sh
record={record}
if [ "$1" = "-d" ]; then
  {fail}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" && : > "$CUDA_MPS_PIPE_DIRECTORY/control"
  echo $$ > "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  echo "-d gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$record"
  exit 0
fi
while read -r command; do
  echo "$command gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" >> "$record"
  if [ "$command" = quit ]; then
    rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  fi
done
exit 0
"""
FAIL = 'echo "An instance of this daemon is already running" >&2; exit 1'


@dataclass(frozen=True)
class FakeMps:
    binary: Path  # the script, named nvidia-cuda-mps-control
    record: Path

    def calls(self) -> list[str]:
        return self.record.read_text().splitlines() if self.record.exists() else []

    def commands(self) -> list[str]:
        """`-d` / `quit` per call, with the GPU: `-d GPU-x`, `quit GPU-x`."""
        out = []
        for line in self.calls():
            words = dict(w.split("=", 1) for w in line.split()[1:])
            out.append(f"{line.split()[0]} {words.get('gpu', '')}")
        return out


def write_fake_mps(directory: Path, fail: bool = False) -> FakeMps:
    directory.mkdir(parents=True, exist_ok=True)
    record = directory / "mps-calls.log"
    binary = directory / "nvidia-cuda-mps-control"
    binary.write_text(SCRIPT.format(record=record, fail=FAIL if fail else ":"))
    binary.chmod(0o755)
    return FakeMps(binary, record)
