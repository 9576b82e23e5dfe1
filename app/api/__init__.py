"""The HTTP routes, one module per feature, and the request helpers they share (deps).

Above every feature package, so no feature imports another one's routes or the auth
dependency (the layering: pyproject.toml [tool.importlinter])."""
