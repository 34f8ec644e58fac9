"""Which task subnet each node of a Ray cluster owns: one /24 (by default) of the cluster's task
network per node, given out once and kept by the control plane.

The book is a JSON file next to the nodes' default roots (`<data dir>/nodes/subnets.json`), so a
node keeps its subnet across control plane restarts and agent restarts (an agent is created
with its subnet; Ray restarts it with the same arguments). An agent adopted from an earlier
control plane reports its subnet, which the book takes as it is (`saw`). A node that left keeps
its entry: its subnet is not given to another node while its tasks might still be out there.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import threading
from pathlib import Path

DEFAULT_NETWORK = "10.213.0.0/16"
NODE_PREFIX = 24


class SubnetsExhausted(RuntimeError):
    """Every subnet of the task network is taken."""


class SubnetBook:
    def __init__(self, path: Path, network: str = DEFAULT_NETWORK, prefix: int = NODE_PREFIX):
        self.path = path
        self.network = str(ipaddress.IPv4Network(network))
        self.prefix = prefix
        self._lock = threading.Lock()
        self._book: dict[str, str] = self._read()

    def _read(self) -> dict[str, str]:
        with contextlib.suppress(OSError, ValueError):
            value = json.loads(self.path.read_text())
            if isinstance(value, dict):
                return {str(k): str(v) for k, v in value.items()}
        return {}

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self._book, sort_keys=True))
        os.replace(tmp, self.path)

    def of(self, node: str) -> str:
        """The node's subnet: its own, or the first free one (recorded before it is used)."""
        with self._lock:
            if node not in self._book:
                taken = set(self._book.values())
                every = ipaddress.IPv4Network(self.network).subnets(new_prefix=self.prefix)
                free = next((str(s) for s in every if str(s) not in taken), None)
                if free is None:
                    raise SubnetsExhausted(f"no free task subnet left in {self.network}")
                self._book[node] = free
                self._write()
            return self._book[node]

    def saw(self, node: str, subnet: str | None) -> None:
        """An agent reports the subnet it runs with: that is the node's."""
        with self._lock:
            if subnet and self._book.get(node) != subnet:
                self._book[node] = subnet
                self._write()
