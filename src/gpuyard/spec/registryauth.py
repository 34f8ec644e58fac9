"""OpenPAI's private-registry credentials: a `dockerimage` prerequisite's `auth`, as logins.

```yaml
prerequisites:
  - {type: dockerimage, name: img, uri: registry.lan:5000/team/train:1,
     auth: {username: bot, password: "<% $secrets.regpass %>", registryuri: registry.lan:5000}}
secrets: {regpass: s3cret}
```

`username` and `password` are required text, with `<% $secrets.x %>` and
`<% $parameters.x %>` references resolved as in commands; `registryuri` (OpenPAI's `docker
login` argument) defaults to the image's registry, and one that is not the image's registry
is a warning (OpenPAI logs in there and pulls from elsewhere: the login is not used). The
converted spec never holds a login: `convert_openpai` only checks them (`check_auth`); the
controller reads them again from the stored original document when it launches a task
(`job_logins`), so they live sealed in that document alone (docs/security.md, Secrets).
"""

from __future__ import annotations

import re
from typing import Any

from gpuyard.model.registries import RegistryLogin, image_registry, registry_host
from gpuyard.spec.errors import Errors, got, item, join
from gpuyard.spec.fields import scalar_text
from gpuyard.spec.notices import Warnings
from gpuyard.spec.original import unmark
from gpuyard.spec.templates import substitute

AUTH_KEYS = ("username", "password", "registryuri")
Scope = tuple[dict[str, Any], "set[str] | frozenset[str]"]  # values, quiet sections
_SECRET_REF = re.compile(r"<%\s*\$secrets\.(\w+)")


def _text(errs: Errors, path: str, value: object, scope: Scope) -> str | None:
    """A credential's text with its references resolved; an error (that never shows the
    value) if it is missing, empty or not text."""
    text = scalar_text(value)
    if text is None or text == "":
        errs.add(path, "must be text, written or as <% $secrets.NAME %>")
        return None
    return substitute(errs, path, text, scope[0], scope[1])


def _login(errs: Errors, warns: Warnings, where: str, entry: dict[Any, Any],
           scope: Scope) -> RegistryLogin | None:
    auth = entry["auth"]
    if not isinstance(auth, dict):
        errs.add(where, f"must be a mapping with username, password and registryuri{got(auth)}")
        return None
    for key in auth:
        if key not in AUTH_KEYS:
            warns.add(join(where, key), "unknown auth field: not used")
    username = _text(errs, join(where, "username"), auth.get("username"), scope)
    password = _text(errs, join(where, "password"), auth.get("password"), scope)
    uri = entry.get("uri")
    image_host = image_registry(uri) if isinstance(uri, str) else None
    given = scalar_text(auth.get("registryuri"))
    host = registry_host(given) if given else image_host
    if host is not None and image_host is not None and host != image_host:
        warns.add(join(where, "registryuri"),
                  f"not the registry of {uri!r} ({image_host}): this login is not used")
        return None
    if username is None or password is None or host is None:
        return None
    return RegistryLogin(host, username, password)


def check_auth(errs: Errors, warns: Warnings, doc: dict[Any, Any], values: dict[str, Any],
               quiet: set[str] | frozenset[str] = frozenset()) -> tuple[RegistryLogin, ...]:
    """The logins of the document's dockerimage prerequisites; each problem recorded at its
    path (`prerequisites[0].auth.password`). `values`: the document's parameters and secrets;
    references to a `quiet` section (one already reported as bad) are not reported again."""
    scope = (values, quiet)
    logins: list[RegistryLogin] = []
    entries = doc.get("prerequisites")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and entry.get("type") == "dockerimage" and (
            entry.get("auth") is not None
        ):
            login = _login(errs, warns, join(item("prerequisites", i), "auth"), entry, scope)
            if login is not None and login not in logins:
                logins.append(login)
    return tuple(logins)


def job_logins(original: dict[str, Any] | None) -> tuple[RegistryLogin, ...]:
    """The logins of a job's stored original document (its secrets `{secret: ...}`-marked,
    as the store gives them back); none for a job in our format. The document was checked at
    submission: what no longer reads is left out."""
    if not original or "protocolVersion" not in original:
        return ()
    doc = unmark(original, reveal=True)
    scope = {key: doc.get(key) if isinstance(doc.get(key), dict) else {}
             for key in ("parameters", "secrets")}
    return check_auth(Errors(), Warnings(), doc, scope)


def redact_auth(doc: Any, redacted: str) -> Any:
    """The OpenPAI document with every registry credential replaced by `redacted`: each
    auth's password, and each secret that an auth's username or password refers to. No caller
    sees these, the owner and admins included (docs/security.md)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("prerequisites"), list):
        return doc
    named: set[str] = set()
    entries = [_without_password(entry, named, redacted) for entry in doc["prerequisites"]]
    out = {**doc, "prerequisites": entries}
    if isinstance(doc.get("secrets"), dict) and named:
        out["secrets"] = {k: redacted if k in named else v for k, v in doc["secrets"].items()}
    return out


def _without_password(entry: Any, named: set[str], redacted: str) -> Any:
    """A prerequisite with its auth's password `redacted`; the secrets its auth refers to
    are added to `named`."""
    auth = entry.get("auth") if isinstance(entry, dict) else None
    if not isinstance(auth, dict):
        return entry
    for key in ("username", "password"):
        if isinstance(auth.get(key), str):
            named.update(_secret_names(auth[key]))
    return {**entry, "auth": {**auth, "password": redacted} if "password" in auth else auth}


def _secret_names(text: str) -> set[str]:
    return set(_SECRET_REF.findall(text))
