"""Service functions behind the API's routers."""
