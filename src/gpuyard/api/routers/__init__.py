"""API routers, one file per resource."""
