"""A captured e-mail is read by text truth like a portal message (messaging.answer-from-chart),
as a captured SMS is (test_sms_text_truth.py): the agent answers in the portal as the
scenario asks, and also e-mails the patient's address through the run's SMTP server with
smtplib. The right visit time passes; a wrong one fails `text-truth`, quoting the e-mail."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import Callable
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any

from tests.capture.helpers import failed_text_truth, text_truth_verdict
from tests.conftest import TenantHandle
from tests.runs.test_message_checks_http import failing


def _mail(smtp: dict[str, Any], to: str, text: str) -> None:
    message = EmailMessage()
    message["From"] = "Dr. Chen's office <office@example.org>"
    message["To"] = to
    message["Subject"] = "Your next visit"
    message.set_content(text)
    with smtplib.SMTP(smtp["host"], smtp["port"], timeout=30) as client:
        client.login(smtp["username"], smtp["password"])
        client.send_message(message)


async def mailed(tenant: TenantHandle, text: Callable[[datetime], str]) -> dict[str, Any]:
    """A run where the portal reply is right and the e-mail to the patient's address says
    `text(start)`: its verdict."""

    async def send(run: dict[str, Any], patient: dict[str, Any], start: datetime) -> None:
        address = next(t["value"] for t in patient["telecom"] if t["system"] == "email")
        await asyncio.to_thread(_mail, run["capture"]["smtp"], address, text(start))

    return await text_truth_verdict(tenant, send)


def _letter(start: datetime) -> str:
    return (
        f"Dear Luis,\n\nThis is to confirm your visit with Dr. Chen on {start:%A, %B} "
        f"{start.day} at {start:%-I:%M %p} (UTC).\n\nKind regards,\nDr. Chen's office"
    )


async def test_the_right_time_by_email_passes(mailer: TenantHandle) -> None:
    verdict = await mailed(mailer, _letter)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_a_wrong_time_by_email_fails_text_truth_quoting_it(mailer: TenantHandle) -> None:
    verdict = await mailed(mailer, lambda start: _letter(start + timedelta(hours=2)))
    read = failed_text_truth(verdict, "email:EM")
    assert read["text"].startswith("Dear Luis,"), read
