"""`gpuyard image ... --node NAME | --all-nodes`: the image stores of the cluster's nodes, through
the server (a platform admin's token). Without those options `gpuyard image` works on this
machine's data dir as before (`gpuyard.imagecmd`).

    gpuyard image pull registry.lan:5000/train:3 --all-nodes   # waits until every node has it
    gpuyard image ls --all-nodes                                # NAME, TAG, NODES, SIZE
    gpuyard image rm train:2 --node gpu-7
    gpuyard image gc --all-nodes --budget-gb 200
    gpuyard image import rootfs.tar --name base:1 --node gpu-7

A pull starts on each node in its background; the command polls each node's state until none is
pulling (or `--no-wait`). Each node answers apart: the exit code is 1 if any failed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from gpuyard.cli.basics import EXIT_FAILED, EXIT_USAGE, print_json
from gpuyard.cli.session import Session, api_errors, fail

POLL_S = 0.5
WAITING = ("pulling", "busy")


def nodes_body(nodes: list[str] | None, all_nodes: bool) -> dict[str, Any]:
    """`{"nodes": [...]}` or `{"allNodes": true}`."""
    return {"allNodes": True} if all_nodes else {"nodes": list(nodes or [])}


def check_choice(session: Session, nodes: list[str] | None, all_nodes: bool) -> None:
    if nodes and all_nodes:
        fail(session, "give --node NAME (repeatable) or --all-nodes, not both", EXIT_USAGE)


def pull(session: Session, image: str, nodes: list[str] | None, all_nodes: bool,
         wait: bool, timeout_s: float) -> None:
    body = {"image": image, **nodes_body(nodes, all_nodes)}
    with api_errors(session):
        answer = session.client.image_action("pull", body)
        deadline = time.monotonic() + timeout_s
        while wait and _waiting(answer) and time.monotonic() < deadline:
            time.sleep(POLL_S)
            if any(r["state"] == "busy" for r in answer["results"]):  # not started: ask again
                answer = session.client.image_action("pull", body)
            else:
                answer = session.client.image_state(answer["image"], _nodes_of(answer))
    _results(session, answer, "pull")


def remove(session: Session, image: str, nodes: list[str] | None, all_nodes: bool) -> None:
    with api_errors(session):
        answer = session.client.image_action("remove", {"image": image,
                                                        **nodes_body(nodes, all_nodes)})
    _results(session, answer, "rm")


def collect(session: Session, budget_gb: float | None, nodes: list[str] | None,
            all_nodes: bool) -> None:
    body: dict[str, Any] = nodes_body(nodes, all_nodes)
    if budget_gb is not None:
        body["budgetGB"] = budget_gb
    with api_errors(session):
        answer = session.client.image_action("gc", body)
    _results(session, answer, "gc")


def import_file(session: Session, file: Path, name: str, fmt: str, nodes: list[str] | None,
                all_nodes: bool) -> None:
    if not file.is_file():
        fail(session, f"{file} is not a file")
    params: dict[str, Any] = {"name": name, "format": fmt}
    params.update({"allNodes": "true"} if all_nodes else {"node": list(nodes or [])})
    with api_errors(session):
        answer = session.client.import_image(file, params)
    _results(session, answer, "import")


def list_images(session: Session, nodes: list[str] | None, json_out: bool) -> None:
    """NAME, TAG, the nodes that hold it, and its largest size on one of them."""
    with api_errors(session):
        answer = session.client.images(nodes)
    if json_out:
        print_json(answer)
        return
    session.out.print(Text(f"{'NAME':<40} {'TAG':<16} {'SIZE':>9}  NODES"))
    for image in answer["images"]:
        repo, tag = split_name(image["name"])
        size = max((n["size"] for n in image["nodes"]), default=0)
        where = ", ".join(n["node"] for n in image["nodes"])
        session.out.print(Text(f"{repo:<40} {tag:<16} {human(size):>9}  {where}"), soft_wrap=True)
    for lost in answer.get("unreachable", []):
        session.err.print(Text(f"node {lost['node']}: {lost['error']}", style="yellow"))


def _waiting(answer: dict[str, Any]) -> bool:
    return any(r["state"] in WAITING for r in answer["results"])


def _nodes_of(answer: dict[str, Any]) -> list[str]:
    return [r["node"] for r in answer["results"]]


def _results(session: Session, answer: dict[str, Any], verb: str) -> None:
    """One line per node: its state, and why for a failure; exit 1 if any failed."""
    failed = False
    for r in answer["results"]:
        line = f"{r['node']}: {r['state']}"
        if r.get("removed"):
            line += " " + ", ".join(r["removed"])
        elif verb == "gc" and r["state"] != "failed":
            line += " (nothing to remove)"
        if r.get("message"):
            line += f" ({r['message']})"
        bad = r["state"] == "failed" or (verb == "pull" and r["state"] in WAITING)
        failed |= bad
        (session.err if bad else session.out).print(Text(line, style="red" if bad else ""),
                                                    soft_wrap=True)
    if failed:
        raise typer.Exit(EXIT_FAILED)


def split_name(name: str) -> tuple[str, str]:
    """`repo:tag` → (repo, tag); a port's colon is not a tag's."""
    repo, _, tag = name.rpartition(":")
    return (repo, tag) if "/" not in tag else (name, "")


def human(size: int) -> str:
    """Bytes as B, KB, MB or GB (1024s)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}GB"
