"""Dependencies shared by the routers (the controller the app was built around)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from gpuyard.controller import Controller


def get_controller(request: HTTPConnection) -> Controller:
    return request.app.state.controller


ControllerDep = Annotated[Controller, Depends(get_controller)]
