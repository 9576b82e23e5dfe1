"""captured_effect: the SMS and integration calls a run's system made, kept on the run
instead of leaving the sandbox (docs/capture.md)

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "captured_effect",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("direction", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("to_address", sa.Text(), nullable=True),
        sa.Column("from_address", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('sms', 'integration', 'email')", name=op.f("ck_captured_effect_kind")
        ),
        sa.CheckConstraint(
            "direction IN ('outbound', 'inbound')", name=op.f("ck_captured_effect_direction")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "run_id"],
            ["run.tenant_id", "run.id"],
            name="fk_captured_effect_run",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_captured_effect")),
    )
    op.create_index(
        "ix_captured_effect_run", "captured_effect", ["tenant_id", "run_id", "seq"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_captured_effect_run", table_name="captured_effect")
    op.drop_table("captured_effect")
