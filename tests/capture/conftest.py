"""The capture tests' fixtures: an API process that runs the SMTP server.

The session's test server runs none (UNDERSTUDY_SMTP_PORT unset, the default), so a test
module that sends mail serves a second API app on the same database with `smtp_port=0`
(any free port), through its own lifespan as `serve` would."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from app.main import create_app
from app.settings import Settings
from tests.conftest import TenantHandle
from tests.threaded_server import ThreadedServer, free_port


@pytest.fixture(scope="module")
def smtp_server_url(settings: Settings, server_url: str) -> Iterator[str]:
    """An API process of its own that runs the SMTP server (after the session's, which
    set up the database and the worker)."""
    app = create_app(settings.clone(smtp_port=0))
    server = ThreadedServer(app, free_port(), "the API with an SMTP server")
    server.start()
    host, port = server.server.config.host, server.server.config.port
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def mailer(tenant: TenantHandle, smtp_server_url: str) -> TenantHandle:
    """The tenant, on the API process that runs the SMTP server."""
    return dataclasses.replace(tenant, server=smtp_server_url)
