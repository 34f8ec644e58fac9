"""Hostile processes, stand-ins for a task on the host: `python hostile.py ACTION ...`.

- `flood PATH COUNT UID`: connect a datagram socket to the unix socket PATH (a name starting
  with `@` is in the abstract namespace) as root, drop to UID, then send COUNT datagrams
  without blocking: a task that got hold of the notify channel.
- `reach PATH UID`: drop to UID first, then send one datagram to PATH: a task trying to reach
  the notify channel on its own.
- `read PATH UID`: drop to UID, then read the file PATH: a task after a platform file.

Each prints one JSON line of what happened.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time


def address(path: str) -> bytes:
    return b"\0" + path[1:].encode() if path.startswith("@") else path.encode()


def become(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def flood(path: str, count: int, uid: int) -> dict:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(address(path))
    except OSError as e:
        return {"connected": False, "error": e.strerror}
    become(uid)
    sock.setblocking(False)
    sent = 0
    for i in range(count):
        try:
            sock.send(f"exited flood-{i}".encode())
            sent += 1
        except BlockingIOError:
            time.sleep(0)  # queue full: yield, go on
        except OSError as e:
            return {"connected": True, "sent": sent, "error": e.strerror}
    return {"connected": True, "sent": sent}


def reach(path: str, uid: int) -> dict:
    become(uid)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(b"exited hostile", address(path))
        except OSError as e:
            return {"sent": False, "error": e.strerror}
    return {"sent": True}


def read(path: str, uid: int) -> dict:
    become(uid)
    try:
        with open(path, "rb") as f:
            return {"read": True, "bytes": len(f.read())}
    except OSError as e:
        return {"read": False, "error": e.strerror}


def main(argv: list[str]) -> None:
    action, args = argv[0], argv[1:]
    if action == "flood":
        result = flood(args[0], int(args[1]), int(args[2]))
    elif action == "reach":
        result = reach(args[0], int(args[1]))
    elif action == "read":
        result = read(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown action {action}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
