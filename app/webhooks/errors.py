"""Errors of webhooks, by cause: callers catch the cause, not the status."""

from __future__ import annotations

from app.errors import NotFound


class WebhookNotFound(NotFound):
    """No webhook subscription with that id in this tenant."""


class DeliveryNotFound(NotFound):
    """No delivery with that id for that subscription."""
