"""The node's ssh kit: a sshd and a ssh client that run in any task's root, whatever its image.

A task's image may have no sshd, no ssh client, or a libc of another kind (musl, an old
glibc). The kit is the node's own Dropbear server (`/usr/sbin/dropbear`, Debian's
`dropbear-bin`: small, made to run as an ordinary user) and OpenSSH client (`/usr/bin/ssh`),
with every library they load and the node's dynamic loader, copied once into
`<state_root>/sshkit/<digest>/` and bind-mounted read-only into ssh tasks at `/run/gpuyard/
sshd` (`sshd.py`). Programs are started through that loader (`lib/ld.so --library-path lib
PROGRAM`), so they never load a library of the image; the image's `/bin/sh` is all a task
needs. The digest covers the programs' paths, sizes and times: a node whose packages are
upgraded builds a new kit, tasks already running keep theirs.

Layout: `lib/` (the libraries and `ld.so`), `libexec/` (`dropbear`, `ssh`, `sleep`), `bin/ssh`
(the client, appended to the task's PATH: an image's own ssh comes first), `init` (the script
that starts sshd and then runs the task's command, `sshd.py`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

CONTAINER_DIR = "/run/gpuyard/sshd"  # where tasks see the kit
KEYS_DIR = "/run/gpuyard/ssh"  # where tasks see their job's keys (sshd.py), also their ~/.ssh
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROGRAMS = {"dropbear": "dropbear", "ssh": "ssh", "sleep": "sleep"}  # kit name → host program
PACKAGES = "dropbear-bin, openssh-client and coreutils (make system)"
LDD_TIMEOUT_S = 10

CLIENT = f"""#!/bin/sh
# gpuyard's ssh client (OpenSSH, the node's), whatever the image's libc
exec {CONTAINER_DIR}/lib/ld.so --library-path {CONTAINER_DIR}/lib {CONTAINER_DIR}/libexec/ssh "$@"
"""

# argv: LISTEN (address:port,...) REQUIRED BARRIER_S HOSTS -- COMMAND...; shell builtins
# only (a busybox image has few programs), the kit's own sleep
INIT = f"""#!/bin/sh
# gpuyard: sshd beside the task's command (the ssh plugin, docs/openpai.md)
kit={CONTAINER_DIR}
listen=$1 required=$2 barrier=$3 hosts=$4
shift 5
export PATH="${{PATH:-/usr/bin:/bin}}:$kit/bin"
log=/dev/shm/gpuyard-sshd.log pidfile=/dev/shm/gpuyard-sshd.pid
run() {{ "$kit/lib/ld.so" --library-path "$kit/lib" "$@"; }}
say() {{ echo "gpuyard ssh: $*" >&2; }}
failed() {{
  say "$1"
  [ -f "$log" ] && while IFS= read -r line; do echo "  $line" >&2; done < "$log"
  [ "$required" = 1 ] && exit 1
}}
ports= spaces=$IFS IFS=,
for address in $listen; do ports="$ports -p $address"; done
IFS=$spaces
# shellcheck disable=SC2086 # one -p per address (LISTEN is comma-separated, no spaces)
run "$kit/libexec/dropbear" -F -E -e -s -m -r {KEYS_DIR}/sshd_host_key $ports \\
  -P "$pidfile" 2>"$log" &
sshd=$! waited=0
while [ ! -s "$pidfile" ]; do
  if ! kill -0 "$sshd" 2>/dev/null; then failed "sshd did not start on $listen"; break; fi
  if [ "$waited" -ge 200 ]; then failed "sshd did not listen on $listen in 10 s"; break; fi
  run "$kit/libexec/sleep" 0.05
  waited=$((waited + 1))
done
if [ "$barrier" -gt 0 ] && [ -s "$pidfile" ]; then
  left=$barrier spaces=$IFS IFS=,
  for host in $hosts; do
    IFS=$spaces
    until "$kit/bin/ssh" -o BatchMode=yes -o ConnectTimeout=5 "$host" true 2>/dev/null; do
      left=$((left - 1))
      if [ "$left" -le 0 ]; then
        failed "ssh barrier: $host did not answer in $barrier s"; break 2
      fi
      run "$kit/libexec/sleep" 1
    done
  done
fi
exec "$@"
"""


class SshUnavailable(OSError):
    """The node cannot give tasks sshd: a program of the kit is not installed."""


def _program(name: str) -> Path:
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise SshUnavailable(f"the ssh plugin needs {name} on this node: install {PACKAGES}")
    return Path(found).resolve()


def _libraries(program: Path) -> tuple[list[Path], Path | None]:
    """The shared libraries `program` loads (ldd, on the node's own trusted binaries) and its
    dynamic loader."""
    try:
        out = subprocess.run(
            ["ldd", str(program)], capture_output=True, text=True, timeout=LDD_TIMEOUT_S,
            check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        raise SshUnavailable(f"cannot list the libraries of {program}: {e}") from e
    libs, loader = [], None
    for line in out.splitlines():
        left, arrow, right = line.strip().partition("=>")
        path = (right if arrow else left).strip().split(" (", 1)[0].strip()
        if not path.startswith("/"):
            continue  # linux-vdso, or a library not found (ldd said so)
        if arrow:
            libs.append(Path(path))
        else:
            loader = Path(path)
    return libs, loader


def _digest(programs: dict[str, Path]) -> str:
    h = hashlib.sha256(INIT.encode() + CLIENT.encode())
    for name, path in sorted(programs.items()):
        st = path.stat()
        h.update(f"{name}={path}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _build(into: Path, programs: dict[str, Path]) -> None:
    for sub in ("lib", "libexec", "bin"):
        (into / sub).mkdir(mode=0o755, parents=True)
    loader = None
    for name, path in programs.items():
        shutil.copy(path, into / "libexec" / name)
        libs, found = _libraries(path)
        loader = loader or found
        for lib in libs:
            if not (into / "lib" / lib.name).exists():
                shutil.copy(lib, into / "lib" / lib.name)  # follows the soname's link
    if loader is None:
        raise SshUnavailable(f"no dynamic loader found for {programs['dropbear']}")
    shutil.copy(loader, into / "lib" / "ld.so")
    (into / "bin" / "ssh").write_text(CLIENT)
    (into / "init").write_text(INIT)
    for script in (into / "bin" / "ssh", into / "init"):
        os.chmod(script, 0o755)
    for path in (into, *into.rglob("*")):
        os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


class SshKit:
    """The kit of one node (built on first use, once per process; safe across processes)."""

    def __init__(self, state_root: Path) -> None:
        self.dir = Path(state_root) / "sshkit"
        self._lock = threading.Lock()
        self._ready: Path | None = None

    def path(self) -> Path:
        """The kit's dir, built if needed; SshUnavailable if the node lacks a program."""
        with self._lock:
            if self._ready is not None and self._ready.is_dir():
                return self._ready
            programs = {name: _program(host) for name, host in PROGRAMS.items()}
            final = self.dir / _digest(programs)
            if not final.is_dir():
                self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                scratch = self.dir / f".build-{os.getpid()}-{threading.get_ident()}"
                shutil.rmtree(scratch, ignore_errors=True)
                try:
                    _build(scratch, programs)
                    os.rename(scratch, final)
                except OSError as e:  # also: another process built it first
                    if not final.is_dir():
                        raise SshUnavailable(f"cannot build the node's ssh kit: {e}") from e
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
            self._ready = final
            return final
