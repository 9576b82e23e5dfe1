"""An e-mail as it came over SMTP, read with the standard library's `email` package
(pure functions): its subject, its text, its attachments and a few headers, as
`service.record_email` keeps them (docs/capture.md "E-mail (SMTP)")."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from html.parser import HTMLParser

from app.capture.service import Attachment

# The headers kept in `data.headers`, when the message has them.
KEPT_HEADERS = ("From", "To", "Cc", "Date", "Message-ID")


@dataclass(frozen=True, slots=True)
class ParsedEmail:
    subject: str | None
    from_: str | None
    body: str
    attachments: list[Attachment]
    headers: dict[str, str]


class _HtmlText(HTMLParser):
    """The text of an HTML part: its character data, blocks on lines of their own,
    scripts and styles left out."""

    BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})
    SKIPPED = frozenset({"script", "style", "head", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.SKIPPED:
            self._skipping += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_text(html: str) -> str:
    reader = _HtmlText()
    reader.feed(html)
    reader.close()
    lines = (
        re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(reader.parts).split("\n")
    )
    return "\n".join(line for line in lines if line)


def _text(part: Message) -> str:
    content = part.get_content() if isinstance(part, EmailMessage) else part.get_payload()
    if isinstance(content, bytes):
        return content.decode("utf-8", "replace")
    return content if isinstance(content, str) else ""


def _base64(part: Message) -> str:
    payload = part.get_payload(decode=True)
    return base64.b64encode(payload if isinstance(payload, bytes) else b"").decode("ascii")


def parse_email(raw: bytes) -> ParsedEmail:
    """The message's parts: the text/plain body (else the text of its text/html), every
    attachment (a part with a filename or marked as one) in base64."""
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)  # policy.default parses into EmailMessage
    found = message.get_body(preferencelist=("plain", "html"))
    body = ""
    if found is not None:
        text = _text(found)
        body = html_text(text) if found.get_content_subtype() == "html" else text
    attachments = [
        Attachment(
            filename=part.get_filename(),
            content_type=part.get_content_type(),
            data_base64=_base64(part),
        )
        for part in message.iter_attachments()
        if not part.is_multipart()
    ]
    headers = {name: str(message[name]) for name in KEPT_HEADERS if message[name] is not None}
    subject = message["Subject"]
    sender = message["From"]
    return ParsedEmail(
        subject=None if subject is None else str(subject),
        from_=None if sender is None else str(sender),
        body=body.strip(),
        attachments=attachments,
        headers=headers,
    )
