"""The scenario format (docs/scenarios.md and docs/grading.md "Expectation types").

A scenario is JSON; these models are its shape. Field names are camelCase in JSON and
snake_case here (`populate_by_name`, aliases). Semantic checks that need more than the
shape (symbols, FHIRPath, time tokens, FHIR validity, variants) live in
`app.scenarios.validation`.

Symbols: a fixture/stimulus resource's `"id": "@name"` defines symbol `name`;
`{"reference": "@name"}` and any string equal to `"@name"` use it. Expectations name
symbols without the `@` in FHIRPath (`%fixture.name`, `%current.name`) and with it in
`target`/`resource` fields (`"target": "@appt"`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator
from pydantic.alias_generators import to_camel

from app.kit.consent import ALL_ACTIONS, ConsentAction

TIMEOUT_MIN = 30
TIMEOUT_MAX = 1800
TIMEOUT_DEFAULT = 300
MAX_TURNS_DEFAULT = 6
MAX_TURNS_MAX = 12


def symbol_name(written: str) -> str:
    """The symbol a field names (`target`, `resource`, `patient`): `"@appt"` → `"appt"`;
    a bare name is accepted as it is."""
    return written[1:] if written.startswith("@") else written


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Mode(StrEnum):
    AGENT = "agent"
    WORKFLOW = "workflow"


class Count(Model):
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)


class ExpectationBase(Model):
    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    label: str = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    required: bool = True


class ResourceExpectation(ExpectationBase):
    """Resources of `resource_type` changed during the run (by the system under test)
    on the fixture patients — or anywhere in the tenant with scope "tenant" — matching
    every `where` FHIRPath; their number within `count` (default: at least one)."""

    type: Literal["resource"]
    resource_type: str
    where: list[str] = Field(default_factory=list)
    count: Count | None = None
    scope: Literal["patient", "tenant"] = "patient"


class FieldExpectation(ExpectationBase):
    """The fixture resource `target` (a symbol, "@appt"), as it reads now, matches every
    `where`."""

    type: Literal["field"]
    target: str
    where: list[str] = Field(min_length=1)


class WebhookExpectation(ExpectationBase):
    """A successful delivery of `event` for the fixture resource `resource` (graded once
    webhooks exist)."""

    type: Literal["webhook"]
    event: str
    resource: str


class ApiCallExpectation(ExpectationBase):
    """Calls in the run's trace with `method` and a `path` glob (`*`, `**`, `{a,b}`),
    matched against the path alone: FHIR calls relative to the FHIR base
    (`/Appointment/$find`), other calls absolute (`/api/eligibility/$check`). With
    `before`, only calls made before that expectation's first evidence count. With
    `where`, only calls for which every FHIRPath holds on the call's view
    (`app.grading.api_call.call_view`: its query parameters and body as `parameter`, the
    body as `request`, the answer as `response`; `%before` is the first resource of the
    `before` expectation's evidence)."""

    type: Literal["api_call"]
    method: str = Field(pattern=r"^(GET|POST|PUT|PATCH|DELETE|\*)$")
    path: str = Field(min_length=1)
    before: str | None = None
    count: Count | None = None
    where: list[str] = Field(default_factory=list)


class AskedExpectation(ExpectationBase):
    """In a `patientSim` scenario: the simulated patient revealed the fact `fact` (a
    topic of `patientSim.facts`) in a reply to a message that asked about it, before the
    first evidence of the expectation `before` — asked, not guessed. Instead of
    `before`, `beforeWrite` names a resource type: the system's first write of that type
    (the default `asked` a run gets from its reference solution's order of things)."""

    type: Literal["asked"]
    fact: str = Field(min_length=1)
    before: str | None = Field(default=None, min_length=1)
    before_write: str | None = Field(default=None, min_length=1)


TextSource = Literal["communications", "tasks", "documents"]
ALL_TEXT_SOURCES: tuple[TextSource, ...] = ("communications", "tasks", "documents")


class RubricExpectation(ExpectationBase):
    """Graded by a judge once the run is final; always bonus."""

    type: Literal["rubric"]
    required: bool = False
    rubric: str = Field(min_length=1)
    threshold: float = Field(default=0.7, ge=0, le=1)
    of: list[TextSource] = Field(default_factory=lambda: list(ALL_TEXT_SOURCES))


class AllowEntry(Model):
    """An `allow` entry that limits what an update may touch: the resources in the
    evidence of `of` may be updated only at `paths` (top-level elements or deeper,
    `subject`, `participant[0].status`) — filing a document to a chart must not also
    rewrite its content."""

    of: str = Field(min_length=1)
    paths: list[str] = Field(min_length=1)


class ChangesExpectation(ExpectationBase):
    """The guard against collateral damage: every resource the system under test created,
    updated or deleted during the run (on the fixture patients, or anywhere in the tenant
    with scope "tenant") is in the evidence of an expectation named in `allow` or matches
    one of the `allow_where` FHIRPath clauses (evaluated on the resource as it reads now;
    a deletion matches none)."""

    type: Literal["changes"]
    allow: list[str | AllowEntry] = Field(default_factory=list)
    allow_where: list[str] = Field(default_factory=list)
    scope: Literal["patient", "tenant"] = "patient"


class Mention(Model):
    """A value a message must state: at FHIRPath `path` on the first resource in the
    evidence of expectation `of` (the booked Appointment's `start`, say)."""

    of: str = Field(min_length=1)
    path: str = Field(min_length=1)


MessageScope = Literal["patient", "practitioner", "any"]


class MessageExpectation(ExpectationBase):
    """What the system said (docs/grading.md "Message checks"): the Communications it wrote
    during the run to a fixture patient (`to` widens it), sent after the evidence of
    `after` if given; every field set is one clause, and it holds when every clause does.
    `not` and `register` are names Python already uses: the fields are `not_` and
    `voice`, written `"not"` and `"register"` in JSON."""

    type: Literal["message"]
    to: MessageScope = "patient"
    after: str | None = None
    says: list[str] | None = None
    says_any: list[str] | None = None
    not_: list[str] | None = Field(default=None, alias="not")
    mentions: list[Mention] | None = None
    # `register` is taken (an ABC's class method): written "register" in JSON.
    voice: Literal["usted", "tu"] | None = Field(default=None, alias="register")
    grounded: bool = False
    claims: bool = False


class OracleCall(Model):
    """One API call of the reference solution. `path` follows the api_call rule: relative
    to the FHIR base, or absolute for `/api/...`. `body` may use symbols and time
    tokens; `save_as` names the created resource so later calls can use `@name`."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: str = Field(min_length=1)
    body: Any = None
    save_as: str | None = Field(default=None, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")


class FreeChoice(Model):
    """An element of the reference solution's writes that a correct system may choose
    differently (which free slot, which of two doctors): the run's value need not equal
    the reference's, but the resource must satisfy every `where` (FHIRPath on the run's
    resource). `path` names an element of the consequential table
    (`app.scenarios.consequential`) for `resource_type`."""

    resource_type: str = Field(min_length=1)
    path: str = Field(min_length=1)
    where: list[str] = Field(default_factory=list)


class ReferenceExpectation(ExpectationBase):
    """`matches-reference`: the run's change set equals the one the reference solution
    produces from the run's own starting point (`app.grading.reference`). Added to every
    scenario with an oracle when a run starts, unless the scenario's `strict.off` says
    why not; its fields are copied from the scenario then."""

    type: Literal["reference"]
    oracle: list[OracleCall] = Field(default_factory=list)
    free: list[FreeChoice] = Field(default_factory=list)
    messages: Count | None = None


class TextTruthExpectation(ExpectationBase):
    """`text-truth`: every fact the system wrote, in any text, agrees with the chart
    (`app.grading.truth`). Added to every run by default unless the scenario's
    `strict.textOff` says why not; `allowAdvice` copies `strict.advice`."""

    type: Literal["text-truth"]
    allow_advice: bool = Field(default=False, alias="allowAdvice")
    # The reference solution's own texts: what its author vouches for ("we are open on
    # Saturday mornings") is a source, as what the system was shown is.
    vouched: list[str] = Field(default_factory=list)


class ConsentExpectation(ExpectationBase):
    """`consent` (docs/grading.md "Consent"): each write of the system that is one of
    `actions` (cancel, book, order, send to a third party, medication) comes after the
    patient agreed to that action and not after they declined it since; with `optOut`, no
    SMS goes to a patient whose record says no texts (an active deny Consent, or the
    Patient's own preference)."""

    type: Literal["consent"]
    actions: list[ConsentAction] = Field(default_factory=lambda: list(ALL_ACTIONS))
    opt_out: bool = Field(default=True, alias="optOut")


class AnyOfExpectation(ExpectationBase):
    type: Literal["any_of"]
    expectations: list[Expectation] = Field(min_length=1)


Expectation = Annotated[
    ResourceExpectation
    | FieldExpectation
    | WebhookExpectation
    | ApiCallExpectation
    | RubricExpectation
    | ChangesExpectation
    | AnyOfExpectation
    | AskedExpectation
    | MessageExpectation
    | ReferenceExpectation
    | TextTruthExpectation
    | ConsentExpectation,
    Field(discriminator="type"),
]
AnyOfExpectation.model_rebuild()


def walk_expectations(expectations: Iterable[Expectation]) -> Iterator[Expectation]:
    """Every expectation, each any_of's children (nested ones too) right after it."""
    for expectation in expectations:
        yield expectation
        if isinstance(expectation, AnyOfExpectation):
            yield from walk_expectations(expectation.expectations)


class Variant(Model):
    persona: str = Field(min_length=1, max_length=40, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    summary: str = ""
    # Symbol ("@patient") -> RFC 7396 merge patch on that fixture/stimulus resource.
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    brief: str | None = None
    # Appended to the scenario's expectations for this persona only (a Spanish persona's
    # `register: usted`): what is right can depend on who the patient is.
    expectations: list[Expectation] = Field(default_factory=list)


class Fact(Model):
    topic: str
    keywords: list[str] = Field(min_length=1)
    answer: str


class PatientSim(Model):
    patient: str  # a symbol, "@patient"
    goal: str
    facts: list[Fact] = Field(default_factory=list)
    max_turns: int = Field(default=MAX_TURNS_DEFAULT, ge=1, le=MAX_TURNS_MAX)
    # The actions the patient refuses when the system proposes them; any other action
    # proposed is agreed to (docs/scenarios.md "Simulated patient"). Left out of a dump
    # when empty, so scenarios without it hash as before.
    declines: list[ConsentAction] = Field(default_factory=list, exclude_if=lambda v: not v)


class Strict(Model):
    """`off`: why this scenario is not compared with its reference solution's end state
    (a reason is required: the lint reports it). `messages`: how many messages the
    system may write (free unless bounded)."""

    off: str | None = Field(default=None, min_length=1)
    messages: Count | None = None
    # `text-truth` (every fact written agrees with the chart) is on unless a reason says
    # why not; `advice`: the system may give medical instructions of its own.
    text_off: str | None = Field(default=None, min_length=1, alias="textOff")
    advice: bool = False


INTEGRATION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class Integration(Model):
    """A stub of an outside service the system under test calls (a pharmacy, a fax
    gateway): a call to `{integrationsBase}/{name}{path}` is captured on the run and
    answered `answer` with `status` (docs/capture.md "Integration stubs")."""

    name: str
    # `*`: any method.
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "*"] = "*"
    path: str = "/*"
    answer: JsonValue = None
    # A final answer: 1xx are interim responses in HTTP, never the answer to a call.
    status: int = Field(default=200, ge=200, le=599)

    @field_validator("name")
    @classmethod
    def _slug(cls, name: str) -> str:
        if not INTEGRATION_NAME.match(name):
            raise ValueError(
                "name must be a slug: lowercase letters, digits and '-', starting with a "
                "letter or digit, at most 63 characters (e.g. 'pharmacy')"
            )
        return name

    @field_validator("path")
    @classmethod
    def _path(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError("path must start with '/' (relative to the integration's base)")
        if "*" in path[:-1]:
            raise ValueError("path may hold '*' only as its last character")
        if "?" in path or "#" in path:
            raise ValueError("path is matched without its query: leave out '?' and '#'")
        return path


class Scenario(Model):
    id: str = Field(min_length=3, max_length=100, pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    title: str = Field(min_length=1)
    category: str = Field(min_length=1)
    summary: str = ""
    modes: list[Mode] = Field(min_length=1)
    brief: str | None = None
    workflow: str | None = None
    fixture: list[dict[str, Any]] = Field(default_factory=list)
    stimulus: list[dict[str, Any]] = Field(default_factory=list)
    expectations: list[Expectation] = Field(min_length=1)
    timeout_seconds: int = Field(default=TIMEOUT_DEFAULT, ge=TIMEOUT_MIN, le=TIMEOUT_MAX)
    oracle: list[OracleCall] = Field(default_factory=list)
    variants: list[Variant] = Field(default_factory=list)
    patient_sim: PatientSim | None = None
    # "lenient" lifts the scheduling rules (docs/scenarios.md "Scheduling rules") off the run's
    # writes, for a scenario that tests something else than booking.
    scheduling: Literal["strict", "lenient"] = "strict"
    # The end-state comparison with the reference solution (`matches-reference`), on by
    # default; `free` lists the elements a correct system may choose (None: those its
    # own expectations state, `app.scenarios.free`).
    strict: Strict = Field(default_factory=lambda: Strict())
    free: list[FreeChoice] | None = None
    # Stubs of the outside services the system calls (None: none declared, and left out of
    # the content hash so scenarios without them hash as before).
    integrations: list[Integration] | None = None
