"""Text → document → `JobSpec`: YAML or JSON bodies, syntax errors with line and column.

YAML is a superset of JSON, but not of every JSON a tool writes (tabs, for one), so a body
that looks like JSON, or is declared JSON, is read as JSON first. Duplicate keys are
errors in both (YAML and JSON parsers would silently keep the last one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import yaml

from gpuyard.spec import limits
from gpuyard.spec.arrays import (
    ARRAY_KEY,
    PARAMETERS_KEY,
    ArrayRequest,
    read_array_request,
    with_parameters,
    without_array,
)
from gpuyard.spec.errors import Errors, FieldError, HugeNumber, SpecError, got
from gpuyard.spec.models import JobSpec
from gpuyard.spec.notices import FieldWarning
from gpuyard.spec.openpai import convert_openpai, is_openpai
from gpuyard.spec.ours import parse_ours


class _DuplicateKey(ValueError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if not isinstance(key, str | int | float | bool):
                continue  # SafeLoader itself refuses unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key '{key}' is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int | HugeNumber:
        try:
            return super().construct_yaml_int(node)  # type: ignore[no-untyped-call]
        except ValueError:  # more digits than Python converts
            return HugeNumber(str(node.value))


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def _fail(message: str) -> SpecError:
    return SpecError([FieldError("", message)])


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"the key '{key}' is given twice")
        out[key] = value
    return out


def _json_int(text: str) -> int | HugeNumber:
    return HugeNumber(text) if len(text) > limits.MAX_NUMBER_DIGITS else int(text)


def _from_json(text: str) -> object:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_json_int)
    except json.JSONDecodeError as e:
        raise _fail(f"JSON syntax error at line {e.lineno}, column {e.colno}: {e.msg}") from e
    except _DuplicateKey as e:
        raise _fail(f"JSON error: {e}") from e


def _from_yaml(text: str) -> object:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = e.problem or e.context or "invalid YAML"
        if e.context and problem.startswith("but "):
            problem = f"{e.context}, {problem}"
        raise _fail(f"YAML syntax error{where}: {problem}") from e
    except yaml.YAMLError as e:
        raise _fail(f"YAML syntax error: {e}") from e


def _decode(text: str | bytes, max_bytes: int = limits.MAX_SPEC_BYTES) -> str:
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _fail(f"the spec is {size} bytes long; at most {max_bytes} allowed")
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise _fail(f"the spec is not UTF-8 text (bad byte at offset {e.start})") from e


def read_document(
    text: str | bytes, content_type: str | None = None, max_bytes: int = limits.MAX_SPEC_BYTES
) -> object:
    """The document a body holds: JSON if declared or if it looks like JSON, else YAML
    (`max_bytes`: a batch of specs may be larger than one spec)."""
    body = _decode(text, max_bytes)
    declared_json = bool(content_type) and "json" in str(content_type).lower()
    try:
        if declared_json:
            return _from_json(body)
        if body.lstrip().startswith(("{", "[")):
            # not JSON after all (YAML flow style, say): then YAML reads it or says why not
            with contextlib.suppress(SpecError):
                return _from_json(body)
        return _from_yaml(body)
    except RecursionError as e:
        raise _fail("the spec is nested too deeply") from e


@dataclass(frozen=True, slots=True)
class LoadedJob:
    """A validated spec, the warnings about fields accepted but not honoured, and the OpenPAI
    document it was converted from (None for our format: the spec is the document). For a
    job array, `array` and `document` (the document without its array fields, from which
    `array_children` makes each child)."""

    spec: JobSpec
    warnings: tuple[FieldWarning, ...] = ()
    original: dict[str, Any] | None = None
    array: ArrayRequest | None = None
    document: dict[str, Any] | None = None


def _parse_one(doc: dict[Any, Any]) -> LoadedJob:
    if not is_openpai(doc):
        return LoadedJob(parse_ours(doc))
    spec, warnings = convert_openpai(doc)
    return LoadedJob(spec, tuple(warnings), doc)


def parse_job(doc: object) -> LoadedJob:
    """A parsed document (our format or OpenPAI v2) → the validated spec and its warnings;
    a job array's spec is its first child's."""
    if doc is None:
        raise _fail("the spec is empty; expected a mapping with name and taskRoles")
    if not isinstance(doc, dict):
        raise _fail(
            f"the spec must be a mapping of fields, like name: ... and taskRoles: ...{got(doc)}"
        )
    if ARRAY_KEY not in doc and PARAMETERS_KEY not in doc:
        return _parse_one(doc)
    errs = Errors()
    openpai = is_openpai(doc)
    array = read_array_request(errs, doc, openpai)
    base = without_array(doc)
    first = base
    if array is not None and array.parameters:
        first = with_parameters(base, array.parameters[0], openpai)
    try:
        loaded = _parse_one(first)
    except SpecError as e:
        raise SpecError([*errs.items, *e.errors]) from None
    errs.raise_if_any()
    return dataclasses.replace(loaded, array=array, document=base)


def array_children(loaded: LoadedJob) -> list[tuple[int, LoadedJob]]:
    """Each index of a job array with its child's spec: the same spec for every index, or,
    with `arrayParameters`, each child's own (SpecError naming the first index that fails)."""
    array = loaded.array
    if array is None:
        return []
    plain = dataclasses.replace(loaded, array=None, document=None)
    if not array.parameters or loaded.document is None:
        return [(index, plain) for index in array.indices]
    openpai = is_openpai(loaded.document)
    children = []
    for index, values in zip(array.indices, array.parameters, strict=True):
        try:
            child = _parse_one(with_parameters(loaded.document, values, openpai))
        except SpecError as e:
            raise SpecError(
                [FieldError(err.path, f"array index {index}: {err.message}") for err in e.errors]
            ) from None
        children.append((index, child))
    return children


def parse_job_spec(doc: object) -> JobSpec:
    """A parsed document (our format or OpenPAI v2) → a validated `JobSpec`."""
    return parse_job(doc).spec


def load_job(text: str | bytes, content_type: str | None = None) -> LoadedJob:
    """A YAML or JSON body → the validated spec, its warnings and its OpenPAI original."""
    return parse_job(read_document(text, content_type))


def load_job_spec(text: str | bytes, content_type: str | None = None) -> JobSpec:
    """A YAML or JSON body → a validated `JobSpec`; `content_type` is a hint only.
    Raises `SpecError` with every problem found."""
    return load_job(text, content_type).spec
