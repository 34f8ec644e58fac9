"""The `gpuyard` command line: a thin HTTP client of the REST API (docs/api.md).

It never imports the server's packages; everything it knows comes over HTTP.
"""
