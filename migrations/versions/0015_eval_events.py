"""eval events and schedules' shared columns: when an eval completed (set once, with its
events in the same transaction), the eval it is compared with, the schedule that started
it; and a payload for webhook events that are not about a FHIR resource

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 16:05:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("eval", sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("eval", sa.Column("baseline_id", sa.Text(), nullable=True))
    op.add_column("eval", sa.Column("schedule_id", sa.Text(), nullable=True))
    op.create_index(
        "ix_eval_unfinished",
        "eval",
        ["tenant_id", "created_at"],
        postgresql_where=sa.text("completed_at IS NULL AND cancelled_at IS NULL"),
    )
    op.create_index("ix_eval_schedule", "eval", ["tenant_id", "schedule_id", "created_at"])
    op.add_column(
        "webhook_event",
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("webhook_event", "payload")
    op.drop_index("ix_eval_schedule", table_name="eval")
    op.drop_index("ix_eval_unfinished", table_name="eval")
    op.drop_column("eval", "schedule_id")
    op.drop_column("eval", "baseline_id")
    op.drop_column("eval", "completed_at")
