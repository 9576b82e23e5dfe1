"""The runs' SMTP server (app/smtp.py): mail sent with Python's smtplib, configured with
the run's SMTP host, port, username and password only, is captured on the run (never
delivered), traced with transport email; no AUTH is 530, wrong credentials 535, an ended
run 550.
The session's test server runs no SMTP server; `mailer` (conftest.py) is the tenant on an
API process of its own that does."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import smtplib
from email.message import EmailMessage
from typing import Any

import pytest

from app.db import Database
from tests.capture.helpers import api_client, captures, finish, start_run
from tests.conftest import TenantHandle, make_tenant

PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def _send(smtp: dict[str, Any], message: EmailMessage, *, login: bool = True) -> None:
    with smtplib.SMTP(smtp["host"], smtp["port"], timeout=30) as client:
        if login:
            client.login(smtp["username"], smtp["password"])
        client.send_message(message)


async def send(smtp: dict[str, Any], message: EmailMessage, *, login: bool = True) -> None:
    await asyncio.to_thread(_send, smtp, message, login=login)


def mail(to: str = "patient@example.net", subject: str = "Your visit") -> EmailMessage:
    message = EmailMessage()
    message["From"] = "clinic@example.org"
    message["To"] = to
    message["Subject"] = subject
    message.set_content("Your visit is confirmed.")
    return message


async def test_the_run_view_carries_the_smtp_login(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    smtp = run["capture"]["smtp"]
    assert smtp["host"] == "127.0.0.1" and smtp["port"] > 0
    assert smtp["username"] == run["id"]
    assert smtp["password"] == run["capture"]["authToken"]


async def test_a_plain_mail_is_captured(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    message = mail(to="Luis Herrera <luis@example.net>")
    message["Cc"] = "nurse@example.org"
    await send(run["capture"]["smtp"], message)
    [kept] = (await captures(mailer, run["id"]))["captures"]
    assert kept["kind"] == "email" and kept["id"].startswith("EM")
    assert kept["status"] == "accepted" and kept["direction"] == "outbound"
    assert kept["subject"] == "Your visit"
    assert kept["body"] == "Your visit is confirmed."
    assert kept["from"] == "clinic@example.org"
    # The envelope's recipients: To and Cc alike, by their bare addresses.
    assert kept["data"]["to"] == ["luis@example.net", "nurse@example.org"]
    assert kept["to"] == "luis@example.net, nurse@example.org"
    headers = kept["data"]["headers"]
    assert headers["To"] == "Luis Herrera <luis@example.net>"
    assert headers["Cc"] == "nurse@example.org" and headers["From"] == "clinic@example.org"
    assert kept["data"]["attachments"] == []


async def test_a_multipart_mail_keeps_its_attachment(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    message = mail(subject="Your lab results")
    message.set_content("Your results are attached.")
    message.add_alternative("<p>Your results are <b>attached</b>.</p>", subtype="html")
    message.add_attachment(PDF, maintype="application", subtype="pdf", filename="results.pdf")
    await send(run["capture"]["smtp"], message)
    [kept] = (await captures(mailer, run["id"]))["captures"]
    assert kept["body"] == "Your results are attached."  # the text/plain part
    [attached] = kept["data"]["attachments"]
    assert attached["filename"] == "results.pdf"
    assert attached["contentType"] == "application/pdf"
    assert base64.b64decode(attached["dataBase64"]) == PDF


async def test_an_html_only_mail_is_read_as_its_text(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    message = mail()
    message.set_content("<html><body><p>Visit at <b>9:30 AM</b></p></body></html>", "html")
    await send(run["capture"]["smtp"], message)
    [kept] = (await captures(mailer, run["id"]))["captures"]
    assert kept["body"] == "Visit at 9:30 AM"


async def test_no_auth_is_530(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    with pytest.raises(smtplib.SMTPSenderRefused) as refused:
        await send(run["capture"]["smtp"], mail(), login=False)
    assert refused.value.smtp_code == 530
    assert (await captures(mailer, run["id"]))["captures"] == []


async def test_a_wrong_password_is_535(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    smtp = {**run["capture"]["smtp"], "password": "0" * 32}
    with pytest.raises(smtplib.SMTPAuthenticationError) as refused:
        await send(smtp, mail())
    assert refused.value.smtp_code == 535


async def test_another_tenants_run_with_this_tenants_token_is_535(
    mailer: TenantHandle, db: Database, smtp_server_url: str
) -> None:
    mine = await start_run(mailer)
    other = dataclasses.replace(await make_tenant(db, smtp_server_url), server=smtp_server_url)
    theirs = await start_run(other)
    smtp = {**mine["capture"]["smtp"], "username": theirs["id"]}
    with pytest.raises(smtplib.SMTPAuthenticationError) as refused:
        await send(smtp, mail())
    assert refused.value.smtp_code == 535
    assert (await captures(other, theirs["id"]))["captures"] == []


async def test_an_ended_run_is_550(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    await finish(mailer, run["id"])
    with pytest.raises(smtplib.SMTPSenderRefused) as refused:
        await send(run["capture"]["smtp"], mail())
    assert refused.value.smtp_code == 550
    assert b"has ended" in refused.value.smtp_error
    assert (await captures(mailer, run["id"]))["captures"] == []


async def test_a_captured_mail_is_traced_and_marks_the_run_changed(
    mailer: TenantHandle, db: Database
) -> None:
    run = await start_run(mailer)

    async def changed_at() -> Any:
        return await db.pool.fetchval(
            "SELECT changed_at FROM run WHERE tenant_id = $1 AND id = $2", mailer.id, run["id"]
        )

    before = await changed_at()
    await send(run["capture"]["smtp"], mail())
    assert await changed_at() > before
    async with api_client(mailer) as client:
        calls = (await client.get(f"/runs/{run['id']}/trace")).json()["calls"]
    [traced] = [c for c in calls if c["transport"] == "email"]
    assert traced["method"] == "DATA" and traced["path"] == "/smtp"
    assert traced["status"] == 250 and not traced["shared"]


def _send_with_auth_login(smtp: dict[str, Any], message: EmailMessage) -> None:
    with smtplib.SMTP(smtp["host"], smtp["port"], timeout=30) as client:
        client.ehlo()
        client.user, client.password = smtp["username"], smtp["password"]
        code, _ = client.auth("LOGIN", client.auth_login)
        assert code == 235
        client.send_message(message)


async def test_auth_login_is_accepted_too(mailer: TenantHandle) -> None:
    run = await start_run(mailer)
    await asyncio.to_thread(_send_with_auth_login, run["capture"]["smtp"], mail())
    [kept] = (await captures(mailer, run["id"]))["captures"]
    assert kept["kind"] == "email" and kept["subject"] == "Your visit"
