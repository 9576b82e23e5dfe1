"""webhooks

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 18:31:48.471902
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_attempt",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("delivery_id", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("response_excerpt", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint(
            "tenant_id", "delivery_id", "attempt", name=op.f("pk_webhook_attempt")
        ),
    )
    op.create_table(
        "webhook_delivery",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("subscription_id", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("resource_ref", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_webhook_delivery")),
    )
    op.create_index(
        "ix_webhook_delivery_order",
        "webhook_delivery",
        ["tenant_id", "subscription_id", "resource_ref", "seq"],
        unique=False,
    )
    op.create_index(
        "ix_webhook_delivery_pending",
        "webhook_delivery",
        ["tenant_id", "next_attempt_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.create_index(
        "ix_webhook_delivery_subscription",
        "webhook_delivery",
        ["tenant_id", "subscription_id", "created_at"],
        unique=False,
    )
    op.create_table(
        "webhook_event",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("resource_type", sa.Text(), nullable=False),
        sa.Column("resource_id", sa.Text(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("fhir_root", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_webhook_event")),
    )
    op.create_index("ix_webhook_event_run", "webhook_event", ["tenant_id", "run_id"], unique=False)
    op.create_table(
        "webhook_subscription",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("resource_types", postgresql.ARRAY(sa.Text()), nullable=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_webhook_subscription")),
    )


def downgrade() -> None:
    op.drop_table("webhook_subscription")
    op.drop_index("ix_webhook_event_run", table_name="webhook_event")
    op.drop_table("webhook_event")
    op.drop_index("ix_webhook_delivery_subscription", table_name="webhook_delivery")
    op.drop_index(
        "ix_webhook_delivery_pending",
        table_name="webhook_delivery",
        postgresql_where=sa.text("status = 'pending'"),
    )
    op.drop_index("ix_webhook_delivery_order", table_name="webhook_delivery")
    op.drop_table("webhook_delivery")
    op.drop_table("webhook_attempt")
