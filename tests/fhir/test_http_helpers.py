"""The hot-path helpers that replace library calls: the same answers as what they
replace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request

from app import request_state as deps
from app.fhir.service import http_date
from app.settings import Settings


def test_http_date_is_the_imf_fixdate_of_email_utils() -> None:
    moment = datetime(2024, 1, 1, 0, 0, 0, 999_999, tzinfo=UTC)
    for n in range(0, 400 * 24, 7):  # every weekday and month, over a leap year
        at = moment + timedelta(hours=n, minutes=n % 60, seconds=n % 61 % 60)
        assert http_date(at) == format_datetime(at, usegmt=True)
    # An offset is turned to GMT, as the header requires.
    paris = datetime(2026, 7, 14, 12, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    assert http_date(paris) == "Tue, 14 Jul 2026 10:30:05 GMT"


def _request(app: FastAPI, host: str, scheme: str = "http", root_path: str = "") -> Request:
    scope: dict[str, Any] = {
        "type": "http",
        "app": app,
        "scheme": scheme,
        "server": ("127.0.0.1", 8000),
        "path": "/api/fhir/r4/Patient",
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", host.encode())],
    }
    return Request(scope)


def test_root_url_follows_host_scheme_and_root_path_and_stays_bounded() -> None:
    app = FastAPI()
    app.state.settings = Settings(database_url="postgresql://x@127.0.0.1/x")
    assert deps.root_url(_request(app, "a.example:8000")) == "http://a.example:8000"
    assert deps.root_url(_request(app, "b.example")) == "http://b.example"
    assert deps.root_url(_request(app, "b.example", "https")) == "https://b.example"
    assert deps.root_url(_request(app, "b.example", root_path="/sub")) == "http://b.example/sub"
    assert deps.root_url(_request(app, "a.example:8000")) == "http://a.example:8000"
    for n in range(deps.ROOTS_CACHED * 2):
        assert deps.root_url(_request(app, f"h{n}.example")) == f"http://h{n}.example"
    assert len(deps._ROOTS) <= deps.ROOTS_CACHED
    app.state.settings = Settings(
        database_url="postgresql://x@127.0.0.1/x", public_url="https://public.example/"
    )
    assert deps.root_url(_request(app, "a.example:8000")) == "https://public.example"
