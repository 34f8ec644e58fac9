"""OpenPAI's `teamwise_storage` runtime plugin → our `storage` field.

`{plugin: teamwise_storage, parameters: {storageConfigNames: [NAME, ...]}, failurePolicy}`
(kube-runtime `plugins/teamwise_storage`): OpenPAI mounts the storage configs its admin
defined under those names, if the user's groups may use them. Here a name is one of the job's
tenant's named storage (`gpuyard admin storage set`, model/storage.py), resolved at submission
in that tenant only: an unknown name is refused there (422 at
`extras.com.microsoft.pai.runtimeplugin[i].parameters.storageConfigNames[j]`). The names of
every teamwise_storage entry are gathered, in order.

Differences, as warnings: no `storageConfigNames` (OpenPAI then mounts the user's *default*
configs; gpuyard has no default storage, so nothing is mounted); `taskroles` (the storage is
mounted in every task of the job); `failurePolicy: ignore` (a storage that cannot be mounted
fails the task here); unknown parameters (not used).
"""

from __future__ import annotations

from typing import Any

from gpuyard.spec.errors import Errors, got, item, join
from gpuyard.spec.notices import Warnings
from gpuyard.spec.openpai_hooks import FAILURE_POLICIES, PLUGINS_PATH

STORAGE_PLUGIN = "teamwise_storage"
NAMES_KEY = "storageConfigNames"


def _names(errs: Errors, warns: Warnings, where: str, entry: dict[Any, Any]) -> list[object]:
    """The entry's storageConfigNames as given (checked as our `storage` later)."""
    params = entry.get("parameters")
    where_params = join(where, "parameters")
    if params is not None and not isinstance(params, dict):
        errs.add(where_params, f"must be a mapping with {NAMES_KEY}{got(params)}")
        return []
    params = params or {}
    for key in params:
        if key != NAMES_KEY:
            warns.add(join(where_params, key), "unknown teamwise_storage parameter: not used")
    names = params.get(NAMES_KEY)
    if not names:
        warns.add(where_params, f"no {NAMES_KEY}: OpenPAI mounts the user's default storage, "
                  "gpuyard has no default storage: nothing is mounted")  # fmt: skip
        return []
    if not isinstance(names, list):
        errs.add(join(where_params, NAMES_KEY), f"must be a list of storage names{got(names)}")
        return []
    return list(names)


def _policy(errs: Errors, warns: Warnings, where: str, entry: dict[Any, Any]) -> None:
    policy = entry.get("failurePolicy", "fail")
    if policy not in FAILURE_POLICIES:
        errs.add(join(where, "failurePolicy"), f"must be fail or ignore{got(policy)}")
    elif policy == "ignore":
        warns.add(join(where, "failurePolicy"), "a storage that cannot be mounted fails the "
                  "task here (an unknown name is refused at submission)")  # fmt: skip


def storage_fields(
    errs: Errors, warns: Warnings, doc: dict[Any, Any], paths: dict[str, str]
) -> dict[str, Any]:
    """Our `storage` from every teamwise_storage plugin; each name's OpenPAI path goes into
    `paths` (ours → OpenPAI's), so a refused name is reported where it was written."""
    extras = doc.get("extras")
    plugins = extras.get(PLUGINS_PATH.split(".", 1)[1]) if isinstance(extras, dict) else None
    if not isinstance(plugins, list):
        return {}
    names: list[object] = []
    for i, entry in enumerate(plugins):
        where = item(PLUGINS_PATH, i)
        if not isinstance(entry, dict) or entry.get("plugin") != STORAGE_PLUGIN:
            continue
        _policy(errs, warns, where, entry)
        if entry.get("taskroles") is not None:
            warns.add(join(where, "taskroles"), "the storage is mounted in every task of the job")
        for j, name in enumerate(_names(errs, warns, where, entry)):
            paths[item("storage", len(names))] = item(join(where, f"parameters.{NAMES_KEY}"), j)
            paths.setdefault("storage", join(where, f"parameters.{NAMES_KEY}"))
            names.append(name)
    return {"storage": names} if names else {}


def storage_paths(doc: dict[Any, Any]) -> dict[str, str]:
    """Our `storage[i]` → the OpenPAI path of that name in `doc` (a checked document)."""
    paths: dict[str, str] = {}
    storage_fields(Errors(), Warnings(), doc, paths)
    return paths
