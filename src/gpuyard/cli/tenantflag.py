"""`gpuyard submit --tenant T`: the spec with its tenant set to T, as JSON for the API.

A member of a tenant other than `default` must name it: `tenant:` in our format,
`defaults.virtualCluster` in OpenPAI v2 (docs/spec.md). A spec that already names another
tenant is a usage error rather than silently overridden.
"""

from __future__ import annotations

import json

import yaml


def with_tenant(spec: bytes, tenant: str) -> bytes:
    """The spec as JSON bytes, naming `tenant`; ValueError when it cannot be or names another."""
    try:
        document = yaml.safe_load(spec)
    except yaml.YAMLError as exc:
        raise ValueError(f"the spec is not YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("the spec is not a mapping of fields")
    place, key = tenant_field(document)
    named = place.get(key)
    if named not in (None, tenant):
        raise ValueError(f"the spec names tenant {named!r}, --tenant says {tenant!r}")
    place[key] = tenant
    return json.dumps(document, default=str).encode()


def tenant_field(document: dict[str, object]) -> tuple[dict[str, object], str]:
    """Where a spec names its tenant: (the mapping, its key)."""
    if "protocolVersion" not in document:
        return document, "tenant"
    defaults = document.get("defaults")
    if not isinstance(defaults, dict):
        defaults = document["defaults"] = {}
    return defaults, "virtualCluster"
