"""The error tree. Services raise these; handlers render them as an OperationOutcome
(FHIR paths) or as problem+json (everything else). A 500 is always a bug."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Issue:
    message: str
    expression: str | None = None
    code: str = "invalid"
    severity: str = "error"


@dataclass
class AppError(Exception):
    message: str
    issues: list[Issue] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    status = 400
    code = "invalid"

    def __post_init__(self) -> None:
        super().__init__(self.message)
        if not self.issues:
            self.issues = [Issue(self.message, code=self.code)]


class BadRequest(AppError):
    status = 400


class InvalidResource(AppError):
    status = 400


class Unauthorized(AppError):
    status = 401
    code = "login"


class NotFound(AppError):
    status = 404
    code = "not-found"


class MethodNotAllowed(AppError):
    status = 405
    code = "not-supported"


class Conflict(AppError):
    status = 409
    code = "conflict"


class Gone(AppError):
    status = 410
    code = "deleted"


class PreconditionFailed(AppError):
    status = 412
    code = "conflict"


class PayloadTooLarge(AppError):
    status = 413
    code = "too-costly"


class UnsupportedMediaType(AppError):
    status = 415
    code = "not-supported"


class Unprocessable(AppError):
    status = 422
    code = "processing"


class TooManyRequests(AppError):
    status = 429
    code = "throttled"
