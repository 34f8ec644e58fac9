"""Dependencies shared by the routers (the controller the app was built around)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from gpuyard.controller import Controller


def get_controller(request: Request) -> Controller:
    return request.app.state.controller


ControllerDep = Annotated[Controller, Depends(get_controller)]
