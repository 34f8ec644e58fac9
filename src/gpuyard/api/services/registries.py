"""Tenants' registry credentials (platform admins only): set, list without secrets, remove.
The controller reads them when it launches a task (controller/launch.py: `launch_logins`)."""

from __future__ import annotations

from gpuyard.api.schemas.registries import RegistryIn
from gpuyard.api.services.tenants import get as get_tenant
from gpuyard.controller import Controller
from gpuyard.model.registries import RegistryLogin, registry_host
from gpuyard.store import RegistryEntry


def host_of(registry: str) -> str:
    """A registry as given in a path (`registry.lan:5000`, `https://index.docker.io/v1/`),
    in the one form logins are kept and matched under; LookupError if it is empty."""
    host = registry_host(registry)
    if not registry.strip():
        raise LookupError("no registry named")
    return host


def entries(ctl: Controller, tenant: str) -> list[RegistryEntry]:
    get_tenant(ctl, tenant)
    return ctl.store.registries.entries(tenant)


def set_login(ctl: Controller, tenant: str, registry: str, body: RegistryIn,
              by: str) -> RegistryEntry:
    get_tenant(ctl, tenant)
    login = RegistryLogin(host_of(registry), body.user(), body.secret())
    return ctl.store.registries.set(tenant, login, by)


def remove(ctl: Controller, tenant: str, registry: str) -> None:
    get_tenant(ctl, tenant)
    if not ctl.store.registries.remove(tenant, host_of(registry)):
        raise LookupError(f"tenant {tenant} has no credentials for {host_of(registry)}")
