"""Content negotiation on the FHIR API: one ASGI middleware for every FHIR path.

The body is always FHIR JSON; only its declared type varies. Low-code HTTP nodes parse a
body as JSON only when the type says `application/json`, so a client that asks for it
(`Accept: application/json` preferred, or `_format=json`) gets that type, and everyone
else the FHIR default `application/fhir+json`. `_format` wins over Accept (as in FHIR).
A request for XML only (or any `_format` other than JSON) is 406 with an
OperationOutcome. An Accept that names neither JSON nor XML (`text/html` alone, say) is
not refused: the default is answered, as HTTP allows, because refusing would break
clients that never cared about the header.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Issue
from app.fhir.outcomes import operation_outcome
from app.kit import jsontext

FHIR_JSON_TYPE = "application/fhir+json"
JSON_TYPE = "application/json"
# What a response may say it is, most preferred first on a tie.
_OFFERS = (FHIR_JSON_TYPE, JSON_TYPE)
# The DSTU2 name some clients still send.
_ALIASES = {"application/json+fhir": FHIR_JSON_TYPE}
_XML_TYPES = frozenset(
    {"application/fhir+xml", "application/xml+fhir", "application/xml", "text/xml"}
)
_FORMATS = {
    "json": JSON_TYPE,
    JSON_TYPE: JSON_TYPE,
    "fhir+json": FHIR_JSON_TYPE,
    FHIR_JSON_TYPE: FHIR_JSON_TYPE,
    "application/json+fhir": FHIR_JSON_TYPE,
}
_JSON_ONLY = (
    "this server answers JSON only: ask for application/fhir+json (the default) or "
    "application/json (Accept: application/json or _format=json)"
)


@dataclass(frozen=True)
class NotAcceptable:
    """The client asked only for a format this server cannot produce."""

    message: str
    field: str  # "_format" or "Accept"


def _media_type(text: str) -> str:
    # `+` in a query string decodes to a space: `_format=fhir+json` arrives as "fhir json".
    media = text.split(";", 1)[0].strip().lower().replace(" ", "+")
    return _ALIASES.get(media, media)


def _accept_ranges(accept: str) -> list[tuple[str, float]]:
    ranges: list[tuple[str, float]] = []
    for part in accept.split(","):
        media, *params = part.split(";")
        media = _media_type(media)
        if not media:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    q = 0.0  # an unreadable weight does not make a type acceptable
        ranges.append((media, q))
    return ranges


def _match(offer: str, ranges: list[tuple[str, float]]) -> tuple[float, int, int]:
    """(q, specificity, -position) of the most specific range matching `offer`; RFC 9110
    says the most specific range decides the weight, whatever its position."""
    kind = offer.split("/", 1)[0]
    best: tuple[float, int, int] = (0.0, -1, 0)
    for position, (media, q) in enumerate(ranges):
        specificity = 2 if media == offer else 1 if media == f"{kind}/*" else 0
        if specificity == 0 and media != "*/*":
            continue
        if specificity > best[1]:
            best = (q, specificity, -position)
    return best


def negotiate(accept: str | None, format_param: str | None) -> str | NotAcceptable:
    """The media type of the answer, from `_format` (first) or the Accept header."""
    if format_param is not None and format_param.strip():
        chosen = _FORMATS.get(_media_type(format_param))
        if chosen is None:
            return NotAcceptable(
                f"_format '{format_param[:40]}' is not supported; {_JSON_ONLY}", "_format"
            )
        return chosen
    if accept is None or not accept.strip():
        return FHIR_JSON_TYPE
    ranges = _accept_ranges(accept)
    scored = [(_match(offer, ranges), -index, offer) for index, offer in enumerate(_OFFERS)]
    (q, _, _), _, offer = max(scored)
    if q > 0:
        return offer
    if any(media in _XML_TYPES for media, _ in ranges):
        return NotAcceptable(f"Accept '{accept[:80]}' asks for XML; {_JSON_ONLY}", "Accept")
    return FHIR_JSON_TYPE


def is_fhir_path(path: str) -> bool:
    return (
        path == "/api/fhir/r4"
        or path.startswith("/api/fhir/r4/")
        or (path.startswith("/api/testing/runs/") and "/fhir/r4" in path)
    )


def _first_format(query_string: bytes) -> str | None:
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name == "_format":
            return value
    return None


def requested_type(headers: list[tuple[bytes, bytes]], query_string: bytes) -> str | NotAcceptable:
    accept = b",".join(v for k, v in headers if k.lower() == b"accept")
    return negotiate(accept.decode("latin-1") if accept else None, _first_format(query_string))


def response_media_type(scope: Scope) -> str:
    """The Content-Type for a FHIR answer built outside the middleware (the 500 handler
    runs outermost); a refused format falls back to the default."""
    wanted = requested_type(scope.get("headers") or [], scope.get("query_string", b""))
    return f"{wanted if isinstance(wanted, str) else FHIR_JSON_TYPE}; charset=utf-8"


class FhirFormatMiddleware:
    """Answers 406 for an XML-only request and relabels `application/fhir+json` bodies as
    `application/json` for clients that asked for it; the bytes are left alone."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_fhir_path(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        wanted = requested_type(scope.get("headers") or [], scope.get("query_string", b""))
        if isinstance(wanted, NotAcceptable):
            await self._refuse(scope, send, wanted)
            return

        async def relabel(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _relabelled(list(message.get("headers", [])), wanted)
            await send(message)

        await self.app(scope, receive, relabel)

    async def _refuse(self, scope: Scope, send: Send, refusal: NotAcceptable) -> None:
        body = jsontext.dumpb(
            operation_outcome(
                [Issue(refusal.message, expression=refusal.field, code="not-supported")]
            )
        )
        # The refusal itself in the JSON type the Accept header prefers, if any.
        accept_only = requested_type(
            [(k, v) for k, v in scope.get("headers") or [] if k.lower() == b"accept"], b""
        )
        media = accept_only if isinstance(accept_only, str) else FHIR_JSON_TYPE
        headers = [
            (b"content-type", f"{media}; charset=utf-8".encode()),
            (b"content-length", str(len(body)).encode()),
            (b"vary", b"Accept"),
        ]
        await send({"type": "http.response.start", "status": 406, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _relabelled(headers: list[tuple[bytes, bytes]], wanted: str) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    has_vary = False
    for key, value in headers:
        name = key.lower()
        if name == b"content-type":
            media, sep, params = value.partition(b";")
            if media.strip().lower() == FHIR_JSON_TYPE.encode():
                value = wanted.encode() + sep + params
        elif name == b"vary":
            has_vary = True
            if b"accept" not in [token.strip() for token in value.lower().split(b",")]:
                value += b", Accept"
        out.append((key, value))
    if not has_vary:
        out.append((b"vary", b"Accept"))
    return out
