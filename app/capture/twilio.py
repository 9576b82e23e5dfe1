"""What Twilio's Messages API answers, shaped here (pure functions): a message resource,
a page of them, an error. An agent using Twilio's own SDK reads these unchanged
(docs/capture.md "SMS").

Twilio's reference: https://www.twilio.com/docs/messaging/api/message-resource
"""

from __future__ import annotations

import base64
import hmac
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlencode

from app.capture.service import Effect

API_VERSION = "2010-04-01"
MORE_INFO = "https://www.twilio.com/docs/errors/{code}"

# Twilio's error codes for what this API refuses.
AUTHENTICATE = 20003  # "Authenticate": no or wrong credentials
NOT_FOUND = 20404  # "The requested resource was not found"
MISSING_TO = 21604  # "'To' phone number is required to send a Message"
MISSING_FROM = 21603  # "'From' phone number is required to send a Message"
MISSING_BODY = 21602  # "Message body is required"
INVALID_PARAMETER = 21211  # "Invalid 'To' Phone Number" (used for any malformed value)
RUN_ENDED = 21610  # Twilio's "attempt to send to unsubscribed recipient": nearest to "no"

# GSM-7's basic character set: a message of only these is 160 characters a segment (153
# once split); anything else goes as UCS-2, 70 UTF-16 units a segment (67 once split).
_GSM7 = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM7_EXTENDED = frozenset("^{}\\[~]|€\f")  # two septets each


def num_segments(body: str) -> int:
    """How many SMS segments Twilio would bill the text as."""
    if all(c in _GSM7 or c in _GSM7_EXTENDED for c in body):
        units = sum(2 if c in _GSM7_EXTENDED else 1 for c in body)
        single, part = 160, 153
    else:
        units = len(body.encode("utf-16-le")) // 2
        single, part = 70, 67
    if units <= single:
        return 1
    return -(-units // part)


def messages_path(account_sid: str) -> str:
    """The Messages list, relative to the run's SMS base (Twilio's `uri` form)."""
    return f"/{API_VERSION}/Accounts/{account_sid}/Messages"


def message(effect: Effect, account_sid: str) -> dict[str, Any]:
    """A message resource as Twilio answers it."""
    base = messages_path(account_sid)
    stamp = format_datetime(effect.at)
    body = effect.body or ""
    params = effect.data.get("params") or {}
    inbound = effect.direction == "inbound"
    return {
        "account_sid": account_sid,
        "api_version": API_VERSION,
        "body": body,
        "date_created": stamp,
        "date_sent": stamp if inbound else None,
        "date_updated": stamp,
        "direction": "inbound" if inbound else "outbound-api",
        "error_code": None,
        "error_message": None,
        "from": effect.from_address,
        "messaging_service_sid": params.get("MessagingServiceSid")
        or effect.data.get("messagingServiceSid"),
        "num_media": "0",
        "num_segments": str(num_segments(body)),
        "price": None,
        "price_unit": "USD",
        "sid": effect.id,
        "status": effect.status,
        "subresource_uris": {"media": f"{base}/{effect.id}/Media.json"},
        "to": effect.to_address,
        "uri": f"{base}/{effect.id}.json",
    }


def page(
    effects: list[Effect],
    account_sid: str,
    *,
    page_number: int,
    page_size: int,
    more: bool,
    filters: dict[str, str],
) -> dict[str, Any]:
    """A page of the Messages list in Twilio's paging shape; the URIs keep the filters."""
    base = messages_path(account_sid) + ".json"

    def uri(number: int) -> str:
        return f"{base}?{urlencode({**filters, 'PageSize': page_size, 'Page': number})}"

    start = page_number * page_size
    return {
        "messages": [message(e, account_sid) for e in effects],
        "end": start + max(len(effects) - 1, 0),
        "first_page_uri": uri(0),
        "next_page_uri": uri(page_number + 1) if more else None,
        "page": page_number,
        "page_size": page_size,
        "previous_page_uri": uri(page_number - 1) if page_number > 0 else None,
        "start": start,
        "uri": uri(page_number),
    }


def error(code: int, message: str, status: int) -> dict[str, Any]:
    """Twilio's error body: `{code, message, more_info, status}`."""
    return {
        "code": code,
        "message": message,
        "more_info": MORE_INFO.format(code=code),
        "status": status,
    }


# What Twilio posts to a number's SmsUrl when a message comes in (its "inbound" webhook):
# https://www.twilio.com/docs/messaging/guides/webhook-request
INBOUND_STATUS = "received"
# Twilio fills these from the sender's number where it knows them; a fictional number has
# no city or country on record, so they are posted empty, as Twilio posts unknown ones.
GEO_FIELDS = tuple(
    f"{side}{part}" for side in ("From", "To") for part in ("City", "State", "Zip", "Country")
)


def inbound_params(
    effect: Effect, account_sid: str, messaging_service_sid: str | None
) -> dict[str, str]:
    """The form fields Twilio posts for an incoming message."""
    body = effect.body or ""
    params = {
        "MessageSid": effect.id,
        "SmsSid": effect.id,
        "SmsMessageSid": effect.id,
        "AccountSid": account_sid,
        "From": effect.from_address or "",
        "To": effect.to_address or "",
        "Body": body,
        "NumMedia": "0",
        "NumSegments": str(num_segments(body)),
        "SmsStatus": INBOUND_STATUS,
        "ApiVersion": API_VERSION,
        **dict.fromkeys(GEO_FIELDS, ""),
    }
    if messaging_service_sid:
        params["MessagingServiceSid"] = messaging_service_sid
    return params


def signature(auth_token: str, url: str, params: dict[str, str]) -> str:
    """`X-Twilio-Signature` as Twilio computes it: base64 of the HMAC-SHA1, under the
    account's auth token, of the full URL followed by each POST parameter, sorted by
    name, as its name and then its value
    (https://www.twilio.com/docs/usage/webhooks/webhooks-security)."""
    signed = url + "".join(name + params[name] for name in sorted(params))
    digest = hmac.new(auth_token.encode(), signed.encode(), "sha1").digest()
    return base64.b64encode(digest).decode()


def numbers_path(account_sid: str) -> str:
    """The IncomingPhoneNumbers list, relative to the run's SMS base."""
    return f"/{API_VERSION}/Accounts/{account_sid}/IncomingPhoneNumbers"


def phone_number(
    account_sid: str, number_sid: str, number: str, sms_url: str | None
) -> dict[str, Any]:
    """The run's number as Twilio's IncomingPhoneNumber resource: its `sms_url` is where
    the patient's replies are posted (the run's `smsReplyUrl`)."""
    return {
        "account_sid": account_sid,
        "api_version": API_VERSION,
        "beta": False,
        "capabilities": {"voice": False, "sms": True, "mms": False, "fax": False},
        "date_created": None,
        "date_updated": None,
        "friendly_name": number,
        "phone_number": number,
        "origin": "twilio",
        "sid": number_sid,
        "sms_application_sid": None,
        "sms_fallback_method": "POST",
        "sms_fallback_url": None,
        "sms_method": "POST",
        "sms_url": sms_url or "",
        "status": "in-use",
        "status_callback": "",
        "status_callback_method": "POST",
        "uri": f"{numbers_path(account_sid)}/{number_sid}.json",
        "voice_url": None,
    }


def phone_numbers_page(account_sid: str, numbers: list[dict[str, Any]]) -> dict[str, Any]:
    """The IncomingPhoneNumbers list: the run has one number."""
    uri = f"{numbers_path(account_sid)}.json?PageSize=50&Page=0"
    return {
        "incoming_phone_numbers": numbers,
        "end": max(len(numbers) - 1, 0),
        "first_page_uri": uri,
        "next_page_uri": None,
        "page": 0,
        "page_size": 50,
        "previous_page_uri": None,
        "start": 0,
        "uri": uri,
    }
