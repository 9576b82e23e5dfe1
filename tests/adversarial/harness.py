"""A small agent API for the adversarial suite: agents that work a built-in scenario over
HTTP the way real agents do (start a run, read the brief and the FHIR base, make FHIR
calls, message the simulated patient and wait for the reply, finish), and the table
convention the category modules share.

A category module (tests/adversarial/test_<category>.py) holds a table

    AGENTS = [
        Agent(
            "double-booking", "wrong", "scheduling.book-named-practitioner", act_fn,
            fails=("no-double-booking",),
        ),
        Agent("transaction-bundle", "correct", "scheduling.book-named-practitioner", act_fn),
        ...
    ]

and the two lines

    agent_results = results_fixture(AGENTS)
    test_agent = agent_test(AGENTS)

which give one test per agent, id `scenario:agent-name`. Every selected agent of a module
runs concurrently in one tenant of the module's own (runs are isolated by their views);
each test then checks its agent's verdict. A wrong agent must run to its end (an agent
that raised may never have made its mistake, so its failed run proves nothing) and its
run must not pass, with every expectation its `fails` names among the failed required
ones: the check about the mistake caught it, not another one by accident (the test
prints which caught it). A write the sandbox itself must refuse is made with
`Run.expect_refused`, which raises if it is accepted, so "refused as expected" is not
mistaken for a crash; the agent then names what the refusal leaves undone (`booked`). A
correct agent must run to its end and its run must pass (the test prints the
expectations that failed).

The worker may end a run as passed before `finish` once every required expectation holds
and the agent has been quiet for `settle_seconds` (1 s in tests). Agents here work without
pauses, so their extra or duplicate writes land well inside that; a duplicate that is the
completing write itself is sent in one Bundle (`create_together`) so no grading can fall
between. `Verdict.ended_early` tells when the run ended before the agent's last write.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

import httpx
import pytest

from app.db import Database
from app.scenarios.expansion import expand_value
from app.scenarios.service import builtin_scenarios
from tests.conftest import TenantHandle, make_tenant

# The clinic keeps UTC: the canonical Slots are weekdays 09:00–17:00 UTC, and grading reads
# times in UTC (app/scenarios/fhirpath_helpers.py).
CLINIC_ZONE = ZoneInfo("UTC")
CHEN = "Practitioner/demo-canonical-prac-chen"
PATEL = "Practitioner/demo-canonical-prac-patel"
ORG = "Organization/demo-canonical-org"
# Runs of one module at once (a tenant may have 20 live runs; the machine is small).
CONCURRENCY = 16
# How long to wait for the simulated patient's reply.
REPLY_WITHIN = 15.0


# Free times handed out by `first_free`: (tenant id, practitioner, start).
_CLAIMED: set[tuple[str, str, datetime]] = set()


@functools.cache
def _fixture_times(day: date) -> frozenset[datetime]:
    """The start of every Appointment a built-in scenario's fixture or stimulus writes, as
    runs starting on `day` expand it: `first_free` never hands these out. A scenario that
    frees a time (the waitlist's cancelled visit) means it for its own agent; another agent
    of the module, running at once in the same tenant, could otherwise book the freed
    Slot first and fail that correct agent by the test, not by the sandbox."""
    now = datetime.now(UTC)
    times: set[datetime] = set()
    for loaded in builtin_scenarios().values():
        scenario = loaded.scenario
        for resource in [*scenario.fixture, *scenario.stimulus]:
            if resource.get("resourceType") != "Appointment" or "start" not in resource:
                continue
            start = expand_value(resource["start"], {}, now)
            if isinstance(start, str):
                times.add(datetime.fromisoformat(start))
    return frozenset(times)


class AgentError(AssertionError):
    """A call the agent needed did not go as it expected."""


@dataclass
class Verdict:
    status: str
    passed: bool
    expectations: list[dict[str, Any]]
    body: dict[str, Any]
    rejected: list[str]  # writes the server refused, "POST /Appointment 409: …"
    ended_early: bool  # the run had ended before the agent's last write
    refused: list[str] = field(default_factory=list)  # refusals the agent expected

    @property
    def failing(self) -> list[dict[str, Any]]:
        """Required expectations that did not hold."""
        return [e for e in self.expectations if e["required"] and e["passed"] is False]

    def failing_ids(self) -> list[str]:
        """The ids of the required expectations that did not hold (an `any_of`'s children
        count through their parent, the only one listed)."""
        return [e["id"] for e in self.failing]

    def ids(self) -> list[str]:
        return [e["id"] for e in self.expectations]

    def describe(self) -> str:
        lines = [f"status {self.status}"]
        for e in self.failing:
            ev = e.get("evidence", {})
            extra = ""
            if ev.get("closest"):
                bad = [c["where"] for c in ev.get("clauses", []) if not c.get("holds")]
                extra = f" closest {ev['closest']} failing {bad}"
            lines.append(f"  FAILED {e['id']} ({e['type']}): {e['detail']}{extra}")
        for r in self.rejected:
            lines.append(f"  rejected write: {r}")
        for r in self.refused:
            lines.append(f"  refused as the agent expected: {r}")
        if self.ended_early:
            lines.append("  the run ended before the agent's last write")
        return "\n".join(lines)


@dataclass
class Run:
    """One live run, as an agent sees it: the brief, the fixture ids and the FHIR base."""

    tenant: TenantHandle
    data: dict[str, Any]
    http: httpx.AsyncClient
    rejected: list[str] = field(default_factory=list)  # refusals the agent did not expect
    refused: list[str] = field(default_factory=list)  # refusals it did (`expect_refused`)
    last_write: float = 0.0  # time.time() of the agent's last write

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def brief(self) -> str:
        return str(self.data.get("brief") or "")

    @property
    def fhir_base(self) -> str:
        return str(self.data["fhirBase"])

    @property
    def fixture(self) -> dict[str, str]:
        return dict(self.data["fixture"])

    @property
    def started_at(self) -> datetime:
        return datetime.fromisoformat(self.data["startedAt"])

    def ref(self, symbol: str) -> str:
        """The "Patient/…" of a fixture symbol ("patient", "@patient" alike)."""
        return self.fixture[symbol.lstrip("@")]

    def rid(self, symbol: str) -> str:
        """The id alone of a fixture resource."""
        return self.ref(symbol).split("/", 1)[1]

    # -- FHIR ---------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.fhir_base}/{path.lstrip('/')}"

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        content_type: str = "application/fhir+json",
        refusal_expected: bool = False,
    ) -> httpx.Response:
        """Any call; a write the server refuses (4xx) is recorded in `rejected` (in
        `refused` with `refusal_expected`)."""
        hdrs = dict(headers or {})
        if body is not None:
            hdrs.setdefault("Content-Type", content_type)
        kwargs: dict[str, Any] = {"params": params, "headers": hdrs}
        if body is not None:
            kwargs["json"] = body
        r = await self.http.request(method, self._url(path), **kwargs)
        if method != "GET":
            self.last_write = time.time()
            if r.status_code >= 400:
                refusals = self.refused if refusal_expected else self.rejected
                refusals.append(f"{method} {path} {r.status_code}: {r.text[:300]}")
        return r

    async def _ok(self, r: httpx.Response) -> dict[str, Any]:
        if r.status_code >= 300:
            raise AgentError(f"{r.request.method} {r.request.url} {r.status_code}: {r.text}")
        if r.status_code == 204 or not r.content:
            return {}
        out: dict[str, Any] = r.json()
        return out

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        return await self._ok(await self.request("GET", path, params=params or None))

    async def search(self, resource_type: str, **params: Any) -> list[dict[str, Any]]:
        bundle = await self.get(resource_type, **params)
        return [e["resource"] for e in bundle.get("entry", [])]

    async def read(self, symbol_or_ref: str) -> dict[str, Any]:
        ref = symbol_or_ref if "/" in symbol_or_ref else self.ref(symbol_or_ref)
        return await self.get(ref)

    async def post(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
        return await self._ok(await self.request("POST", path, body, **kw))

    async def create(self, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return await self.post(body["resourceType"], body, **kw)

    async def put(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
        return await self._ok(await self.request("PUT", path, body, **kw))

    async def update(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.put(f"{body['resourceType']}/{body['id']}", body)

    async def patch(self, path: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 JSON patch."""
        return await self._ok(
            await self.request("PATCH", path, ops, content_type="application/json-patch+json")
        )

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._ok(
            await self.request("PATCH", path, body, content_type="application/merge-patch+json")
        )

    async def delete(self, path: str) -> None:
        await self._ok(await self.request("DELETE", path))

    async def transaction(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """A transaction Bundle of `{"method", "url", "resource"?, "fullUrl"?}` entries."""
        bundle_entries = []
        for e in entries:
            entry: dict[str, Any] = {"request": {"method": e["method"], "url": e["url"]}}
            if "resource" in e:
                entry["resource"] = e["resource"]
            if "fullUrl" in e:
                entry["fullUrl"] = e["fullUrl"]
            if "ifNoneExist" in e:
                entry["request"]["ifNoneExist"] = e["ifNoneExist"]
            bundle_entries.append(entry)
        return await self.post(
            "", {"resourceType": "Bundle", "type": "transaction", "entry": bundle_entries}
        )

    async def create_together(self, *bodies: dict[str, Any]) -> dict[str, Any]:
        """POST each body in one transaction Bundle (all land at once: a run can't pass
        between them)."""
        return await self.transaction(
            [
                {"method": "POST", "url": b["resourceType"], "fullUrl": urn(), "resource": b}
                for b in bodies
            ]
        )

    async def expect_refused(self, method: str, path: str, body: Any = None) -> int:
        """A write of a wrong agent's that the sandbox must refuse (4xx): its status. One
        it accepts raises `AgentError` (the test fails: the mistake went into the chart
        unrefused, which is not what the agent is about), so a refusal as expected is
        told apart from a crash; the refusal is kept in `refused`, not `rejected`."""
        r = await self.request(method, path, body, refusal_expected=True)
        if not 400 <= r.status_code < 500:
            raise AgentError(
                f"{method} {path}: the sandbox was to refuse this, it answered "
                f"{r.status_code}: {r.text[:300]}"
            )
        return r.status_code

    # -- scheduling ---------------------------------------------------------------------

    async def free_times(
        self,
        practitioner: str,
        start: datetime,
        end: datetime,
        minutes: int = 30,
    ) -> list[tuple[datetime, datetime]]:
        """Free times from `Appointment/$find`, earliest first."""
        params = {
            "practitioner": practitioner,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "duration": minutes,
        }
        bundle = await self.get("Appointment/$find", **params)
        out = []
        for e in bundle.get("entry", []):
            a = e["resource"]
            out.append((datetime.fromisoformat(a["start"]), datetime.fromisoformat(a["end"])))
        return sorted(out)

    async def first_free(
        self,
        practitioner: str,
        *,
        days: tuple[int, int] = (1, 14),
        minutes: int = 30,
        accept: Callable[[datetime], bool] = lambda _: True,
    ) -> tuple[datetime, datetime]:
        """The first free time `days` from now whose local (clinic) start `accept`s, and
        that no other agent of this test session was given: the agents of a module run at
        once in one tenant, and two taking the same time would race for it (the loser's
        booking a 409, a correct agent failed by the test, not by the sandbox)."""
        now = datetime.now(UTC)
        for s, e in await self.free_times(
            practitioner, now + timedelta(days=days[0]), now + timedelta(days=days[1]), minutes
        ):
            claim = (str(self.tenant.id), practitioner, s)
            if s in _fixture_times(now.date()):
                continue
            if accept(s.astimezone(CLINIC_ZONE)) and claim not in _CLAIMED:
                _CLAIMED.add(claim)
                return s, e
        raise AgentError(f"no free time for {practitioner} in {days} days")

    # -- eligibility --------------------------------------------------------------------

    async def eligibility(self, patient: str, on: date) -> dict[str, Any]:
        r = await self.http.post(
            f"{self.tenant.server}/api/eligibility/$check",
            json={"patient": self.ref(patient), "date": on.isoformat()},
        )
        return await self._ok(r)

    # -- the simulated patient ----------------------------------------------------------

    def message_to(
        self,
        patient: str,
        text: str,
        *,
        sender: str = CHEN,
        **extra: Any,
    ) -> dict[str, Any]:
        ref = self.ref(patient)
        return {
            "resourceType": "Communication",
            "status": "completed",
            "subject": {"reference": ref},
            "recipient": [{"reference": ref}],
            "sender": {"reference": sender},
            "sent": datetime.now(UTC).isoformat(),
            "payload": [{"contentString": text}],
            **extra,
        }

    async def send(self, patient: str, text: str, **kw: Any) -> dict[str, Any]:
        return await self.create(self.message_to(patient, text, **kw))

    async def ask(self, patient: str, text: str, **kw: Any) -> str:
        """Message the patient and wait for the simulated reply to it: its text."""
        return await self.reply_to(patient, await self.send(patient, text, **kw))

    async def reply_to(self, patient: str, sent: dict[str, Any]) -> str:
        """Wait for the simulated patient's reply to a message sent earlier: its text."""
        mine = f"Communication/{sent['id']}"
        deadline = time.monotonic() + REPLY_WITHIN
        while time.monotonic() < deadline:
            for c in await self.search(
                "Communication", sender=self.ref(patient), _sort="-_lastUpdated"
            ):
                if any(r.get("reference") == mine for r in c.get("inResponseTo", [])):
                    return " ".join(p.get("contentString", "") for p in c.get("payload", []))
            await asyncio.sleep(0.15)
        raise AgentError(f"no reply to {mine} within {REPLY_WITHIN} s")

    # -- the end ------------------------------------------------------------------------

    async def finish(self) -> Verdict:
        r = await self.http.post(f"{self.tenant.server}/api/testing/runs/{self.id}/finish")
        body = await self._ok(r)
        ended = body.get("finishedAt")
        early = bool(
            ended
            and self.last_write
            and datetime.fromisoformat(ended).timestamp() < self.last_write - 0.5
        )
        return Verdict(
            status=body["status"],
            passed=bool(body.get("passed")),
            expectations=list(body.get("expectations", [])),
            body=body,
            rejected=list(self.rejected),
            ended_early=early,
            refused=list(self.refused),
        )


async def start_run(
    tenant: TenantHandle,
    http: httpx.AsyncClient,
    scenario: str,
    *,
    mode: str | None = None,
    variant: str | None = None,
) -> Run:
    body: dict[str, Any] = {"scenarioId": scenario, "label": "adversarial"}
    if mode:
        body["mode"] = mode
    if variant:
        body["variant"] = variant
    r = await http.post(f"{tenant.server}/api/testing/runs", json=body)
    if r.status_code != 201:
        raise AgentError(f"start {scenario}: {r.status_code} {r.text}")
    return Run(tenant, r.json(), http)


# -- the table convention ---------------------------------------------------------------

Act = Callable[[Run], Awaitable[None]]


@dataclass(frozen=True)
class Agent:
    """One agent of a module's table. A wrong agent names in `fails` the expectation ids
    its mistake must break (each must be among the run's failing required expectations:
    caught by the check that is about the mistake, not incidentally by another); a
    correct agent names none. `misses` names checks that are about the mistake but do
    not catch it today (a known grading gap, caught only by what `fails` names): they
    must still hold, so the test tells when the gap closes (move the id to `fails`)."""

    name: str
    kind: Literal["wrong", "correct"]
    scenario: str
    act: Act
    mode: str | None = None
    variant: str | None = None
    why: str = ""  # what it does (wrong: the mistake; correct: the unusual route)
    fails: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.fails, str):
            raise TypeError(f"{self.key}: `fails` is a tuple of ids, not one string")
        if self.kind == "wrong" and not self.fails:
            raise ValueError(f"{self.key}: a wrong agent names the expectations it fails")
        if self.kind == "correct" and (self.fails or self.misses):
            raise ValueError(f"{self.key}: a correct agent fails no expectation")

    @property
    def key(self) -> str:
        return f"{self.scenario}:{self.name}"


@dataclass
class Outcome:
    agent: Agent
    verdict: Verdict | None
    error: str | None  # the agent raised (a call failed, a refusal it expected did not come)
    seconds: float


async def play(tenant: TenantHandle, agent: Agent) -> Outcome:
    t0 = time.monotonic()
    async with httpx.AsyncClient(headers=tenant.headers, timeout=60) as http:
        run = await start_run(tenant, http, agent.scenario, mode=agent.mode, variant=agent.variant)
        error = None
        try:
            await agent.act(run)
        except Exception as exc:  # the verdict still says what the run did
            error = f"{type(exc).__name__}: {exc}"
        verdict = await run.finish()
    return Outcome(agent, verdict, error, time.monotonic() - t0)


async def play_all(tenant: TenantHandle, agents: list[Agent]) -> dict[str, Outcome]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(agent: Agent) -> Outcome:
        async with gate:
            try:
                return await play(tenant, agent)
            except Exception as exc:
                return Outcome(agent, None, f"{type(exc).__name__}: {exc}", 0.0)

    done = await asyncio.gather(*(one(a) for a in agents))
    return {o.agent.key: o for o in done}


def check_outcome(outcome: Outcome) -> None:
    agent = outcome.agent
    v = outcome.verdict
    assert v is not None, f"{agent.key}: the run could not be played: {outcome.error}"
    head = f"{agent.key} ({agent.kind}: {agent.why}) in {outcome.seconds:.1f} s\n{v.describe()}"
    if outcome.error:
        head += f"\n  agent error: {outcome.error}"
    print(head)
    if agent.kind == "wrong":
        # An agent that raised may never have made its mistake: its run failing proves
        # nothing about the grading.
        assert outcome.error is None, f"a wrong agent did not run to its end\n{head}"
        assert not v.passed and v.status != "passed", f"a wrong agent passed\n{head}" + (
            "\n  (it ended early: do the wrong work first)" if v.ended_early else ""
        )
        unknown = [i for i in (*agent.fails, *agent.misses) if i not in v.ids()]
        assert not unknown, f"no expectation {unknown} in this run ({v.ids()})\n{head}"
        missed = [i for i in agent.fails if i not in v.failing_ids()]
        assert not missed, (
            f"the mistake was not caught by {missed}, only by {v.failing_ids()}\n{head}"
        )
        closed = [i for i in agent.misses if i in v.failing_ids()]
        assert not closed, f"the grading gap is closed: name {closed} in `fails`\n{head}"
    else:
        assert outcome.error is None, f"a correct agent's call failed\n{head}"
        assert v.passed and v.status == "passed", f"a correct agent failed\n{head}"


def results_fixture(agents: list[Agent]) -> Any:
    """A module-scoped fixture playing every agent of the module that was selected,
    concurrently, in one tenant of the module's own."""
    keys = [a.key for a in agents]
    assert len(set(keys)) == len(keys), "agent names repeat within a scenario"

    @pytest.fixture(scope="module")
    async def agent_results(
        request: pytest.FixtureRequest, db: Database, server_url: str
    ) -> dict[str, Outcome]:
        selected = {
            item.callspec.params["agent"].key
            for item in request.session.items
            if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
        }
        tenant = await make_tenant(db, server_url, prefix="adv")
        t0 = time.monotonic()
        out = await play_all(tenant, [a for a in agents if a.key in selected])
        print(f"\n{request.module.__name__}: {len(out)} runs in {time.monotonic() - t0:.1f} s")
        return out

    return agent_results


def agent_test(agents: list[Agent]) -> Any:
    @pytest.mark.parametrize("agent", agents, ids=[a.key for a in agents])
    def test_agent(agent: Agent, agent_results: dict[str, Outcome]) -> None:
        check_outcome(agent_results[agent.key])

    return test_agent


# -- small helpers agents share ---------------------------------------------------------


def iso(dt: datetime, zone: ZoneInfo | None = None) -> str:
    """A dateTime for a FHIR body, in UTC or written in `zone`'s offset (same instant)."""
    return (dt.astimezone(zone) if zone else dt.astimezone(UTC)).isoformat()


def participants(*refs: str) -> list[dict[str, Any]]:
    return [{"actor": {"reference": r}, "required": "required", "status": "accepted"} for r in refs]


def urn() -> str:
    return f"urn:uuid:{uuid.uuid4()}"


def local(dt: datetime) -> datetime:
    return dt.astimezone(CLINIC_ZONE)


def weekdays_from(start: date, n: int) -> Iterator[date]:
    d = start
    while n > 0:
        d += timedelta(days=1)
        if d.weekday() < 5:
            n -= 1
            yield d
