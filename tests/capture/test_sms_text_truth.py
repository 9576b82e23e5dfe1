"""A captured SMS is read by text truth like a portal message (messaging.answer-from-chart):
the agent answers in the portal as the scenario asks, and also texts the patient through
Twilio's SDK pointed at the run. The right visit time passes; a wrong one fails
`text-truth`, and the evidence quotes the SMS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from twilio.rest import Client

from tests.capture.helpers import failed_text_truth, text_truth_verdict
from tests.conftest import TenantHandle
from tests.runs.test_message_checks_http import failing


def _twilio(run: dict[str, Any]) -> Client:
    c = run["capture"]
    client = Client(c["accountSid"], c["authToken"])
    client.api.base_url = c["smsBase"]
    return client


async def texted(tenant: TenantHandle, sms: Callable[[datetime], str]) -> dict[str, Any]:
    """A run where the portal reply is right and the SMS says `sms(start)`: its verdict."""

    async def send(run: dict[str, Any], patient: dict[str, Any], start: datetime) -> None:
        phone = next(t["value"] for t in patient["telecom"] if t["system"] == "phone")
        await asyncio.to_thread(
            _twilio(run).messages.create,
            to=phone,
            from_=run["capture"]["from"],
            body=sms(start),
        )

    return await text_truth_verdict(tenant, send)


def _reminder(start: datetime) -> str:
    return (
        f"Reminder: your visit with Dr. Chen is {start:%A, %B} {start.day} at "
        f"{start:%-I:%M %p} (UTC). Reply STOP to opt out."
    )


async def test_the_right_time_by_sms_passes(tenant: TenantHandle) -> None:
    verdict = await texted(tenant, _reminder)
    assert verdict["status"] == "passed", {k: v["detail"] for k, v in failing(verdict).items()}


async def test_a_wrong_time_by_sms_fails_text_truth_quoting_the_sms(tenant: TenantHandle) -> None:
    verdict = await texted(tenant, lambda start: _reminder(start + timedelta(hours=2)))
    read = failed_text_truth(verdict, "sms:SM")
    assert read["text"].startswith("Reminder: your visit with Dr. Chen is "), read
