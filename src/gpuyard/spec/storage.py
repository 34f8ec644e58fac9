"""Our format's `storage` field: the tenant's named storage a job's tasks mount (what OpenPAI's
`teamwise_storage` runtime plugin becomes, spec/openpai_plugins.py).

```yaml
storage: [datasets, scratch]   # names a platform admin defined for the job's tenant
```

Here only the names are checked (their form, none twice, at most 16); what a name means, a
host path and a mount point, is the tenant's (model/storage.py): the API resolves each name in
the job's own tenant at submission (an unknown one is a 422 at `storage[i]`) and the
controller again at launch.
"""

from __future__ import annotations

from gpuyard.model.storage import MAX_JOB_STORAGE, storage_name_problem
from gpuyard.spec.errors import Errors, got, item


def read_storage(errs: Errors, path: str, value: object) -> tuple[str, ...] | None:
    """A list of storage names, each once."""
    if not isinstance(value, list) or len(value) > MAX_JOB_STORAGE:
        errs.add(path, f"must be a list of at most {MAX_JOB_STORAGE} storage names{got(value)}")
        return None
    names: list[str] = []
    for i, name in enumerate(value):
        if (problem := storage_name_problem(name)) is not None:
            errs.add(item(path, i), f"{problem}{got(name)}")
        elif name in names:
            errs.add(item(path, i), f"names storage {name} a second time")
        else:
            names.append(name)
    return tuple(names)
