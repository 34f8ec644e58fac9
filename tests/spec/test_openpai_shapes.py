"""Any value at any place of an OpenPAI document is accepted or refused with paths (a
SpecError), never an exception of another kind (a 500 in the API); what is accepted can be
stored (its original document is JSON-safe)."""

from __future__ import annotations

import copy
import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuyard.spec import SpecError, parse_job
from gpuyard.spec.original import mark_secrets, unmark

CORPUS = Path(__file__).parent / "openpai_corpus"
RICH = (
    "cmd-plugin", "role-prerequisites", "deployment", "hived-gpu-type", "data-script-output",
    "container-options", "ports", "parameters-and-secrets", "registry-auth",
)  # fmt: skip
SHAPES: tuple[Any, ...] = (
    None, 0, -1, 2.5, "x", "", True, [], {}, [1], ["x"], {"a": 1}, {"name": ["x"]}, [[1]],
    datetime.date(2020, 1, 2), b"\xff",
)  # fmt: skip


def places(doc: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        yield from places(value, (*path, key))


def replaced(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def check(doc: Any) -> None:
    try:
        loaded = parse_job(doc)
    except SpecError as e:
        assert e.errors and all(isinstance(x.path, str) for x in e.errors)
        return
    if loaded.original is not None:
        stored = json.loads(json.dumps(mark_secrets(loaded.original)))
        assert unmark(stored, reveal=False) is not None


@pytest.mark.parametrize("name", RICH)
def test_every_value_anywhere_is_accepted_or_refused_with_paths(name: str) -> None:
    doc = yaml.safe_load((CORPUS / f"{name}.yaml").read_text())
    for path in places(doc):
        if path:
            for value in SHAPES:
                check(replaced(doc, path, value))


def test_a_yaml_date_in_the_original_is_kept_as_text() -> None:
    doc = yaml.safe_load((CORPUS / "minimal.yaml").read_text())
    doc["version"] = datetime.date(2021, 5, 1)
    stored = json.loads(json.dumps(mark_secrets(parse_job(doc).original)))
    assert stored["version"] == "2021-05-01"
