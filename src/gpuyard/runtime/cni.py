"""Running the CNI reference plugins: `bridge` with `host-local` addresses, as the CNI spec says.

The plugins are Debian's `containernetworking-plugins` (`/usr/lib/cni`; upstream's
`/opt/cni/bin` is looked at too, `$GPUYARD_CNI_PATH` wins). A plugin is an executable called
with `CNI_COMMAND` (ADD or DEL), `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME` and `CNI_PATH` in
its environment and the network's config as JSON on stdin; ADD prints the result (the
interface's address) as JSON. Nothing here is gpuyard's own networking: `bridge` makes the node's
bridge, the veth pair and the routes, `host-local` hands out and records the addresses (one
file per address under the config's `dataDir`, holding the container id).
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path
from typing import Any

CNI_VERSION = "1.0.0"
CNI_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
PATH_ENV = "GPUYARD_CNI_PATH"
PLUGINS = ("bridge", "host-local")
TIMEOUT_S = 30.0
IFNAME = "eth0"  # the task's interface, inside its namespace


class CniError(OSError):
    """A plugin failed, or none is installed; the message says which and why."""


def plugin_dir() -> str:
    """The dir holding `bridge` and `host-local`; CniError if none does."""
    wanted = os.environ.get(PATH_ENV)
    for d in (wanted,) if wanted else CNI_DIRS:
        if all(os.access(Path(d) / p, os.X_OK) for p in PLUGINS):
            return d
    raise CniError(
        f"no CNI plugins ({', '.join(PLUGINS)}) in {wanted or ' or '.join(CNI_DIRS)}: "
        "install Debian's containernetworking-plugins (make system)"
    )


def bridge_config(name: str, bridge: str, subnet: str, ipam_dir: Path) -> dict[str, Any]:
    """The node's network: bridge `bridge`, the first address of `subnet` its gateway, the rest
    handed out by host-local (records in `ipam_dir`); no masquerade (gpuyard's nftables table
    does it, for the tenants that may reach the internet)."""
    net = ipaddress.ip_network(subnet)
    return {
        "cniVersion": CNI_VERSION,
        "name": name,
        "type": "bridge",
        "bridge": bridge,
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": False,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": str(net), "gateway": str(net.network_address + 1)}]],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": str(ipam_dir),
        },
    }


def add(config: dict[str, Any], container_id: str, netns: str) -> str:
    """Give the namespace at `netns` its interface and an address; the address (no prefix)."""
    out = _run("ADD", config, container_id, netns)
    try:
        address = json.loads(out)["ips"][0]["address"]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise CniError(f"CNI bridge gave no address for {container_id}: {out[:300]!r}") from e
    return str(address).split("/")[0]


def delete(config: dict[str, Any], container_id: str, netns: str | None) -> None:
    """Undo `add`: the veth goes, the address is given back (also with the namespace gone)."""
    _run("DEL", config, container_id, netns or "")


def _run(command: str, config: dict[str, Any], container_id: str, netns: str) -> bytes:
    plugins = plugin_dir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_NETNS": netns,
        "CNI_IFNAME": IFNAME,
        "CNI_PATH": plugins,
    }
    try:
        done = subprocess.run(
            [str(Path(plugins) / config["type"])],
            input=json.dumps(config).encode(),
            env=env,
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CniError(f"CNI {config['type']} {command} for {container_id}: {e}") from e
    if done.returncode != 0:
        said = (done.stdout or done.stderr).decode(errors="replace").strip()
        raise CniError(f"CNI {config['type']} {command} for {container_id} failed: {said[:500]}")
    return done.stdout
