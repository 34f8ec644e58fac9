"""The OpenPAI v2 corpus (tests/spec/openpai_corpus): every config converts as its header says
(accepted, accepted with warnings on exactly these paths, or refused on exactly these), its
converted fields are what they should be, and together the configs use every protocol field,
each of which the table of docs/spec.md lists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuyard.spec import SpecError, load_job

CORPUS = Path(__file__).parent / "openpai_corpus"
DOCS = Path(__file__).parents[2] / "docs" / "spec.md"
FILES = sorted(CORPUS.glob("*.yaml"))
HEADER = re.compile(r"#\s*(expect|path|spec|command):\s*(.*)")

# every field of OpenPAI protocol v2 as gpuyard knows it: `*` a name (role, port label),
# `[]` any item of a list
FIELDS = (
    *("protocolVersion", "name", "type", "version", "contributor", "description"),
    *("parameters", "secrets", "jobRetryCount"),
    *("prerequisites[].protocolVersion", "prerequisites[].name", "prerequisites[].type"),
    *("prerequisites[].version", "prerequisites[].contributor", "prerequisites[].description"),
    *("prerequisites[].uri", "prerequisites[].auth.username", "prerequisites[].auth.password"),
    *("prerequisites[].auth.registryuri", "prerequisites[].plugin", "prerequisites[].require"),
    *("prerequisites[].failurePolicy", "prerequisites[].callbacks[].event"),
    "prerequisites[].callbacks[].commands",
    *("taskRoles.*.protocolVersion", "taskRoles.*.instances", "taskRoles.*.taskRetryCount"),
    *("taskRoles.*.completion.minFailedInstances", "taskRoles.*.completion.minSucceededInstances"),
    *("taskRoles.*.dockerImage", "taskRoles.*.data", "taskRoles.*.output", "taskRoles.*.script"),
    *("taskRoles.*.prerequisites", "taskRoles.*.extraContainerOptions.shmMB"),
    "taskRoles.*.extraContainerOptions.infiniband",
    *("taskRoles.*.resourcePerInstance.cpu", "taskRoles.*.resourcePerInstance.memoryMB"),
    *("taskRoles.*.resourcePerInstance.gpu", "taskRoles.*.resourcePerInstance.ports.*"),
    "taskRoles.*.commands",
    *("deployments[].name", "deployments[].protocolVersion", "deployments[].version"),
    *("deployments[].taskRoles.*.preCommands", "deployments[].taskRoles.*.postCommands"),
    *("defaults.virtualCluster", "defaults.deployment"),
    *("extras.com.microsoft.pai.runtimeplugin[].plugin", "extras.gangAllocation"),
    "extras.com.microsoft.pai.runtimeplugin[].parameters",
    "extras.com.microsoft.pai.runtimeplugin[].taskroles",
    "extras.com.microsoft.pai.runtimeplugin[].failurePolicy",
    *("extras.hivedScheduler.jobPriorityClass", "extras.hivedScheduler.taskRoles.*.gpuType"),
    "extras.hivedScheduler.taskRoles.*.skuType",
    "extras.hivedScheduler.taskRoles.*.reservationId",
    "extras.hivedScheduler.taskRoles.*.affinityGroupName",
    "extras.submitFrom",
)
LEAVES = ("parameters", "secrets", "description", "commands", "preCommands", "postCommands")
NAMED = ("taskRoles", "ports")  # their keys are names, written `*`
PLUGINS = "com.microsoft.pai.runtimeplugin"


def header(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"expect": [], "path": [], "spec": [], "command": []}
    for line in path.read_text().splitlines():
        if match := HEADER.fullmatch(line.strip()):
            out[match.group(1)].append(match.group(2).strip())
    return out


def field_of(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        doc = doc[key]
    return doc


def fields_used(doc: Any, path: str = "", parent: str = "") -> set[str]:
    """The protocol fields `doc` uses, written as in FIELDS."""
    if isinstance(doc, list):
        return set().union(*(fields_used(v, f"{path}[]", parent) for v in doc), {path})
    if not isinstance(doc, dict) or parent in LEAVES or path.endswith(f"{PLUGINS}[].parameters"):
        return {path}
    out = {path}
    for key, value in doc.items():
        name = "*" if parent in NAMED else str(key)
        out |= fields_used(value, f"{path}.{name}" if path else name, str(key))
    return out


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_corpus_config(path: Path) -> None:
    wanted = header(path)
    assert len(wanted["expect"]) == 1, f"{path.name}: one '# expect:' line"
    expect = wanted["expect"][0]
    if expect == "refused":
        with pytest.raises(SpecError) as caught:
            load_job(path.read_text())
        assert {e.path for e in caught.value.errors} == set(wanted["path"]), caught.value.errors
        return
    loaded = load_job(path.read_text())
    assert loaded.original is not None
    assert {w.path for w in loaded.warnings} == set(wanted["path"]), loaded.warnings
    assert expect == ("warnings" if wanted["path"] else "ok"), path.name
    document = loaded.spec.to_document()
    for line in wanted["spec"]:
        dotted, value = (part.strip() for part in line.split("=", 1))
        assert field_of(document, dotted) == json.loads(value), line
    for line in wanted["command"]:
        role, text = (part.strip() for part in line.split("~", 1))
        command = document["taskRoles"][role]["command"]
        assert text in (command["secret"] if isinstance(command, dict) else command), line


def test_the_corpus_uses_every_field_of_the_protocol() -> None:
    used = set().union(*(fields_used(yaml.safe_load(f.read_text())) for f in FILES))
    assert sorted(set(FIELDS) - used) == []


def test_docs_list_every_field() -> None:
    text = DOCS.read_text()
    missing = [f for f in FIELDS if f"`{f}`" not in text]
    assert missing == []


def test_each_warning_says_what_happens_instead() -> None:
    for path in FILES:
        if header(path)["expect"] == ["warnings"]:
            for warning in load_job(path.read_text()).warnings:
                assert len(warning.message) > 20 and ":" in str(warning), warning
