"""The simulated patient answers an SMS (issue 30): an agent on Twilio's SDK texts the
patient of a patientSim scenario, the patient's reply is captured as an inbound SMS and
posted to the run's `smsReplyUrl` in Twilio's inbound format, signed as Twilio signs
(checked with Twilio's own RequestValidator in a real receiver), retried when the
receiver fails."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from twilio.base.exceptions import TwilioRestException
from twilio.request_validator import RequestValidator
from twilio.rest import Client

from app.capture import credentials, twilio
from app.capture import inbound as capture_inbound
from app.capture.service import Effect
from app.console import run_views
from app.console.session import SECRET_FILE
from app.db import Database, Scopes
from app.kit import jsontext
from app.kit.clock import utcnow
from app.runs import sms_patient
from app.runs.sms_patient import patient_phones, phone_digits
from tests.capture.helpers import api_client, captures
from tests.conftest import TenantHandle, make_tenant
from tests.threaded_server import ThreadedServer, free_port

ANSWER = "Any weekday afternoon after 2 pm works for me."
PHONE = "(555) 010-4477"  # as the chart writes it
E164 = "+15550104477"  # as Twilio writes the From
TWIML = "<?xml version='1.0' encoding='UTF-8'?><Response><Message>Thanks!</Message></Response>"
SCENARIO: dict[str, Any] = {
    "id": "custom.sms-ask-time",
    "title": "Ask the patient by text when suits them",
    "category": "scheduling",
    "modes": ["agent"],
    "brief": "Text {{patient.name}} to ask which day and time suit them.",
    "fixture": [
        {
            "resourceType": "Patient",
            "id": "@patient",
            "name": [{"family": "Lindqvist", "given": ["Maja"]}],
            "telecom": [
                {"system": "email", "value": "maja@example.org"},
                {"system": "phone", "value": PHONE, "use": "mobile"},
            ],
        }
    ],
    "expectations": [
        {
            "id": "no-rx",
            "type": "resource",
            "label": "No prescription",
            "resourceType": "MedicationRequest",
            "count": {"max": 0},
        }
    ],
    "patientSim": {
        "patient": "@patient",
        "goal": "Move my appointment to another day",
        "facts": [
            {"topic": "preferred time", "keywords": ["day", "time", "when"], "answer": ANSWER}
        ],
        "maxTurns": 3,
    },
}


@dataclass
class Inbound:
    url: str  # as it was posted to, query and all
    form: dict[str, str]
    headers: dict[str, str]


@dataclass
class TwilioReceiver:
    """A real receiver of Twilio's inbound webhook on 127.0.0.1: records each post and
    answers the next scripted status (then 200), with a TwiML reply."""

    port: int = field(default_factory=free_port)
    script: list[int] = field(default_factory=list)
    received: list[Inbound] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/twilio/inbound?tenant=clinic-1"

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = scope["query_string"].decode()
        url = f"http://{headers['host']}{scope['path']}" + (f"?{query}" if query else "")
        self.received.append(
            Inbound(url, dict(parse_qsl(body.decode(), keep_blank_values=True)), headers)
        )
        status = self.script.pop(0) if self.script else 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/xml")],
            }
        )
        await send({"type": "http.response.body", "body": TWIML.encode()})

    async def wait_for(self, count: int, within: float = 20) -> list[Inbound]:
        # The receiver runs in its own thread and loop: poll rather than share an Event.
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if len(self.received) >= count:
                break
            await asyncio.sleep(0.05)
        return list(self.received)


@pytest.fixture
def receiver() -> Iterator[TwilioReceiver]:
    r = TwilioReceiver()
    server = ThreadedServer(r.app, r.port, "the Twilio webhook receiver")
    server.start()
    yield r
    server.stop()


async def start(tenant: TenantHandle, reply_url: str | None, **extra: Any) -> dict[str, Any]:
    async with api_client(tenant) as client:
        imported = await client.post("/scenarios", json=SCENARIO)
        assert imported.status_code == 201, imported.text
        body = {"scenarioId": SCENARIO["id"], **extra}
        if reply_url is not None:
            body["smsReplyUrl"] = reply_url
        started = await client.post("/runs", json=body)
    assert started.status_code == 201, started.text
    run: dict[str, Any] = started.json()
    return run


def sdk(run: dict[str, Any]) -> Client:
    c = run["capture"]
    client = Client(c["accountSid"], c["authToken"])
    client.api.base_url = c["smsBase"]  # the one change an agent makes
    return client


async def text_patient(run: dict[str, Any], body: str, to: str = E164) -> str:
    sent = await asyncio.to_thread(
        sdk(run).messages.create, to=to, from_=run["capture"]["from"], body=body
    )
    assert sent.status == "queued"
    return str(sent.sid)


async def inbound_of(
    tenant: TenantHandle, run_id: str, count: int = 1, within: float = 20, **where: Any
) -> list[dict[str, Any]]:
    """The run's inbound captures, once `count` of them match `where` (data.delivery
    fields), or what there is after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = [
            c
            for c in (await captures(tenant, run_id))["captures"]
            if c["direction"] == "inbound"
            and all((c["data"].get("delivery") or {}).get(k) == v for k, v in where.items())
        ]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_the_patients_reply_arrives_signed_in_twilios_format(
    tenant: TenantHandle, receiver: TwilioReceiver, db: Database
) -> None:
    run = await start(tenant, receiver.url)
    c = run["capture"]
    assert c["smsReplyUrl"] == receiver.url
    sid = await text_patient(run, "Hi Maja, which day and time would suit you?")

    [post] = await receiver.wait_for(1)
    form = post.form
    validator = RequestValidator(c["authToken"])
    assert validator.validate(receiver.url, form, post.headers["x-twilio-signature"])
    assert post.url == receiver.url
    assert not validator.validate(
        receiver.url, {**form, "Body": "forged"}, post.headers["x-twilio-signature"]
    )
    assert post.headers["content-type"] == "application/x-www-form-urlencoded"
    assert form["From"] == E164  # the patient's number
    assert form["To"] == c["from"]  # the number the text came from
    assert ANSWER in form["Body"]
    assert form["AccountSid"] == c["accountSid"]
    assert form["MessageSid"] == form["SmsSid"] == form["SmsMessageSid"]
    assert form["MessageSid"].startswith("SM") and len(form["MessageSid"]) == 34
    assert form["MessageSid"] != sid
    assert (form["NumMedia"], form["NumSegments"], form["SmsStatus"]) == ("0", "1", "received")
    assert form["ApiVersion"] == "2010-04-01"
    assert all(form[f] == "" for f in twilio.GEO_FIELDS)
    assert "MessagingServiceSid" not in form  # the text came from a number

    # Captured as an inbound SMS, its delivery recorded with the receiver's TwiML kept.
    [reply] = await inbound_of(tenant, run["id"], status="delivered")
    assert reply["id"] == form["MessageSid"]
    assert (reply["kind"], reply["status"]) == ("sms", "received")
    assert (reply["from"], reply["to"], reply["body"]) == (E164, c["from"], form["Body"])
    assert reply["data"]["inReplyTo"] == sid
    [attempt] = reply["data"]["deliveries"]
    assert attempt["statusCode"] == 200 and attempt["error"] is None
    assert attempt["response"] == TWIML and attempt["url"] == receiver.url
    assert reply["data"]["delivery"]["attempts"] == 1

    # Twilio's Messages list shows it, inbound, beside the text it answers.
    listed = await asyncio.to_thread(sdk(run).messages.list)
    assert [(m.sid, m.direction, m.status) for m in listed] == [
        (reply["id"], "inbound", "received"),
        (sid, "outbound-api", "queued"),
    ]
    from_patient = await asyncio.to_thread(sdk(run).messages.list, from_=E164)
    assert [m.sid for m in from_patient] == [reply["id"]]

    # The attempt is in the run's trace, as an SMS call to the receiver.
    async with api_client(tenant) as client:
        trace = (await client.get(f"/runs/{run['id']}/trace")).json()
    posted = [t for t in trace["calls"] if t["path"] == receiver.url]
    assert [(t["method"], t["status"], t["transport"]) for t in posted] == [("POST", 200, "sms")]

    # A second pass at the same text answers nothing more (one sim_reply per SID).
    assert await sms_patient.answer_texts(Scopes(db.pool), None, tenant.id, run["id"]) == []
    # A later text to the same number (written otherwise) is answered too.
    await text_patient(run, "Thanks! Anything else?", to="+1 555 010 4477")
    await receiver.wait_for(2)
    replies = await inbound_of(tenant, run["id"], count=2, status="delivered")
    assert len(replies) == 2
    assert len(receiver.received) == 2


async def test_the_url_is_set_on_a_live_run_as_a_numbers_sms_url(
    tenant: TenantHandle, receiver: TwilioReceiver
) -> None:
    run = await start(tenant, None)
    client = sdk(run)
    [number] = await asyncio.to_thread(client.incoming_phone_numbers.list)
    assert number.phone_number == run["capture"]["from"] and number.sms_url == ""
    assert number.sid.startswith("PN") and len(number.sid) == 34
    with pytest.raises(TwilioRestException) as refused:
        await asyncio.to_thread(client.incoming_phone_numbers(number.sid).update, sms_url="ftp://x")
    assert refused.value.status == 400 and "SmsUrl" in refused.value.msg
    updated = await asyncio.to_thread(
        client.incoming_phone_numbers(number.sid).update, sms_url=receiver.url
    )
    assert updated.sms_url == receiver.url
    async with api_client(tenant) as api:
        view = (await api.get(f"/runs/{run['id']}")).json()
    assert view["capture"]["smsReplyUrl"] == receiver.url
    with pytest.raises(TwilioRestException) as unknown:
        await asyncio.to_thread(client.incoming_phone_numbers("PN" + "0" * 32).fetch)
    assert unknown.value.status == 404

    await text_patient(run, "Which day suits you?")
    [post] = await receiver.wait_for(1)
    assert post.form["From"] == E164
    assert RequestValidator(run["capture"]["authToken"]).validate(
        receiver.url, post.form, post.headers["x-twilio-signature"]
    )


async def test_a_receiver_down_at_first_gets_the_reply_on_a_retry(
    tenant: TenantHandle, receiver: TwilioReceiver
) -> None:
    receiver.script = [503, 500]
    run = await start(tenant, receiver.url)
    await text_patient(run, "When would suit you for the visit?")
    posts = await receiver.wait_for(3)
    assert len(posts) == 3
    # The same message each time, signed the same.
    assert len({p.form["MessageSid"] for p in posts}) == 1
    assert len({p.headers["x-twilio-signature"] for p in posts}) == 1
    validator = RequestValidator(run["capture"]["authToken"])
    assert validator.validate(receiver.url, posts[-1].form, posts[-1].headers["x-twilio-signature"])
    [reply] = await inbound_of(tenant, run["id"], status="delivered")
    assert [a["statusCode"] for a in reply["data"]["deliveries"]] == [503, 500, 200]
    assert reply["data"]["delivery"]["attempts"] == 3


async def test_an_unreachable_receiver_fails_after_the_retries(tenant: TenantHandle) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/sms"
    run = await start(tenant, nobody)
    await text_patient(run, "Which day suits you?")
    [reply] = await inbound_of(tenant, run["id"], status="failed")
    attempts = reply["data"]["deliveries"]
    assert len(attempts) == 6  # the first and five retries (the test settings)
    assert all(a["statusCode"] is None and a["error"] for a in attempts)


async def test_without_a_reply_url_the_reply_is_only_captured(tenant: TenantHandle) -> None:
    run = await start(tenant, None)
    assert run["capture"]["smsReplyUrl"] is None
    sid = await text_patient(run, "Which day would suit you?")
    [reply] = await inbound_of(tenant, run["id"])
    assert ANSWER in reply["body"] and reply["data"]["delivery"] is None
    # A text to another number is not the patient's: no answer to it.
    await text_patient(run, "Which day?", to="+15550109999")
    await asyncio.sleep(2)
    assert len(await inbound_of(tenant, run["id"], within=0)) == 1
    # The verdict names the text answered and the answer by their SIDs.
    async with api_client(tenant) as client:
        verdict = (await client.post(f"/runs/{run['id']}/finish")).json()
    [simulated] = verdict["simulatedPatient"]
    assert simulated["message"] == f"sms:{sid}"
    assert simulated["reply"] == f"sms:{reply['id']}"
    assert simulated["engine"] == "scripted"


async def test_the_patients_word_on_a_proposal_by_sms_is_recorded(
    tenant: TenantHandle, db: Database
) -> None:
    run = await start(tenant, None)
    sid = await text_patient(run, "Would you like me to cancel your appointment?")
    [reply] = await inbound_of(tenant, run["id"])
    assert "cancel it" in reply["body"]
    decisions = await db.pool.fetchval(
        "SELECT decisions::text FROM sim_reply WHERE tenant_id = $1 AND run_id = $2 "
        "AND message_id = $3",
        tenant.id,
        run["id"],
        sid,
    )
    assert jsontext.loads(decisions) == [{"action": "cancel", "agreed": True}]


async def test_a_reply_whose_job_was_lost_is_sent_by_the_sweeper(
    tenant: TenantHandle, receiver: TwilioReceiver, db: Database
) -> None:
    run = await start(tenant, receiver.url)
    # Written as a reply is, by a unit of work with no job queue: nothing is enqueued
    # after it commits, as when the process died between commit and enqueue.
    async with Scopes(db.pool).transaction() as tx:
        effect = await capture_inbound.record_inbound_sms(
            tx,
            tenant.id,
            run["id"],
            to=run["capture"]["from"],
            from_=E164,
            body="Tuesday works.",
            in_reply_to="SM" + "1" * 32,
            messaging_service_sid="MG" + "2" * 32,
            reply_url=receiver.url,
        )
    [post] = await receiver.wait_for(1, within=20)
    assert post.form["MessageSid"] == effect.id
    assert post.form["MessagingServiceSid"] == "MG" + "2" * 32
    assert RequestValidator(run["capture"]["authToken"]).validate(
        receiver.url, post.form, post.headers["x-twilio-signature"]
    )
    [delivered] = await inbound_of(tenant, run["id"], status="delivered")
    assert delivered["id"] == effect.id


async def test_a_human_driven_run_gets_no_simulated_reply(
    tenant: TenantHandle, receiver: TwilioReceiver
) -> None:
    run = await start(tenant, receiver.url, patientDriver="human")
    await text_patient(run, "Which day and time suit you?")
    # A grading pass has run since the text (the patient would have answered in it).
    async with api_client(tenant) as client:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            view = (await client.get(f"/runs/{run['id']}")).json()
            if view["status"] != "live":
                break  # graded and ended (a final view has no progress)
            if (
                view["progress"].get("lastGradedAt")
                and view["progress"]["lastGradedAt"] > (view["startedAt"])
            ):
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(1.5)
    assert await inbound_of(tenant, run["id"], within=0) == []
    assert receiver.received == []


async def test_another_tenant_cannot_see_the_reply(
    tenant: TenantHandle, db: Database, server_url: str
) -> None:
    run = await start(tenant, None)
    await text_patient(run, "Which day would suit you?")
    assert len(await inbound_of(tenant, run["id"])) == 1
    other = await make_tenant(db, server_url)
    async with httpx.AsyncClient(headers=other.headers) as client:
        listed = await client.get(f"{server_url}/api/testing/runs/{run['id']}/captures")
    assert listed.status_code == 404
    theirs = await start(other, None)
    t = theirs["capture"]
    async with httpx.AsyncClient(auth=(t["accountSid"], t["authToken"])) as client:
        base = f"{run['capture']['smsBase']}/2010-04-01/Accounts/{t['accountSid']}/Messages"
        assert (await client.get(base + ".json")).status_code == 401
    assert await inbound_of(other, theirs["id"], within=0) == []


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://example.org/sms", "http or https"),
        ("/relative/sms", "http or https"),
        ("http://:80/sms", "http or https"),
        ("http://example.org:99999/sms", "not a valid URL"),
        ("https://example.org/sms#frag", "fragment"),
    ],
)
async def test_a_bad_reply_url_is_a_422_naming_the_field(
    tenant: TenantHandle, url: str, says: str
) -> None:
    async with api_client(tenant) as client:
        await client.post("/scenarios", json=SCENARIO)
        r = await client.post("/runs", json={"scenarioId": SCENARIO["id"], "smsReplyUrl": url})
    assert r.status_code == 422, r.text
    assert "smsReplyUrl" in r.text and says in r.text


def test_the_signature_is_twilios() -> None:
    url = "https://agent.example/twilio/inbound?x=1&y=two"
    params = {"Body": "Hi & bye", "From": "+15550104477", "To": "+15551234567", "A": ""}
    token = "12345678901234567890123456789012"
    ours = twilio.signature(token, url, params)
    assert ours == RequestValidator(token).compute_signature(url, params)
    assert RequestValidator(token).validate(url, params, ours)


def test_patient_phones_are_read_by_their_digits() -> None:
    patient = {
        "telecom": [
            {"system": "phone", "value": "+1 (555) 010-4477"},
            {"system": "sms", "value": "555.010.9000"},
            {"system": "email", "value": "x@example.org"},
            {"system": "phone"},
        ]
    }
    assert set(patient_phones(patient)) == {"5550104477", "5550109000"}
    assert phone_digits("+15550104477") == phone_digits("555-010-4477") == "5550104477"


def test_the_conversation_shows_the_reply_as_the_patients() -> None:
    effect = Effect(
        id="SM" + "0" * 32,
        seq=1,
        run_id="run_x",
        kind="sms",
        direction="inbound",
        at=utcnow(),
        to_address="+15551234567",
        from_address=E164,
        subject=None,
        body=ANSWER,
        data={},
        status="received",
    )
    line = run_views.capture_line(effect.view())
    assert line.line == f"sms from {E164}: {ANSWER}"


def test_the_worker_reads_the_consoles_secret_file() -> None:
    assert credentials.SECRET_FILE == SECRET_FILE
