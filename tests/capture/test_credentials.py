"""The run credentials are a pure function of the secret, the tenant and the run: every
process with the secret derives the same ones, and the token names its tenant."""

from __future__ import annotations

import uuid

from app.capture import credentials

SECRET = b"s" * 32


def test_the_same_inputs_derive_the_same_credentials() -> None:
    tenant = uuid.uuid4()
    one = credentials.credentials(SECRET, tenant, "run_abc")
    assert one == credentials.credentials(SECRET, tenant, "run_abc")
    assert one != credentials.credentials(b"t" * 32, tenant, "run_abc")
    assert one.account_sid != credentials.credentials(SECRET, tenant, "run_abd").account_sid
    assert one.auth_token != credentials.credentials(SECRET, uuid.uuid4(), "run_abc").auth_token


def test_the_token_names_its_tenant_for_its_run_only() -> None:
    tenant = uuid.uuid4()
    token = credentials.credentials(SECRET, tenant, "run_abc").auth_token
    assert credentials.tenant_of_token(SECRET, "run_abc", token) == tenant
    assert credentials.tenant_of_token(SECRET, "run_other", token) != tenant
    assert credentials.tenant_of_token(b"t" * 32, "run_abc", token) != tenant
    for malformed in ("", "xyz", "0" * 31, "g" * 32):
        assert credentials.tenant_of_token(SECRET, "run_abc", malformed) is None
