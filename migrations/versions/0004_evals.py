"""evals

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 18:36:30.411795
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "eval",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("request", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("timeout_seconds", sa.Integer(), nullable=True),
        sa.Column("root_url", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_eval")),
    )
    op.create_index("ix_eval_label", "eval", ["tenant_id", "label", "created_at"], unique=False)
    op.create_table(
        "eval_item",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("eval_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("scenario_id", sa.Text(), nullable=False),
        sa.Column("persona", sa.Text(), nullable=True),
        sa.Column("repeat_index", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "eval_id", "position", name=op.f("pk_eval_item")),
    )
    op.create_index("ix_eval_item_run", "eval_item", ["tenant_id", "run_id"], unique=False)
    op.create_index(
        "ix_eval_item_state", "eval_item", ["tenant_id", "state", "queued_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_eval_item_state", table_name="eval_item")
    op.drop_index("ix_eval_item_run", table_name="eval_item")
    op.drop_table("eval_item")
    op.drop_index("ix_eval_label", table_name="eval")
    op.drop_table("eval")
