"""ORM models; importing this package registers every table on `Base.metadata`."""

from app.models.base import Base
from app.models.capture import CapturedEffect
from app.models.eval import Eval, EvalItem
from app.models.fhir import FhirDate, FhirHistory, FhirResource
from app.models.llm import LlmCall, SimReplyLog
from app.models.run import CustomScenario, Run, RunRef, UsageCounter
from app.models.schedule import EvalSchedule, EvalScheduleFire
from app.models.tenant import ApiKey, ConsoleSession, SigninToken, Tenant
from app.models.trace import TraceCall
from app.models.webhook import WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription

__all__ = [
    "ApiKey",
    "Base",
    "CapturedEffect",
    "ConsoleSession",
    "CustomScenario",
    "Eval",
    "EvalItem",
    "EvalSchedule",
    "EvalScheduleFire",
    "FhirDate",
    "FhirHistory",
    "FhirResource",
    "LlmCall",
    "Run",
    "RunRef",
    "SigninToken",
    "SimReplyLog",
    "Tenant",
    "TraceCall",
    "UsageCounter",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEvent",
    "WebhookSubscription",
]
