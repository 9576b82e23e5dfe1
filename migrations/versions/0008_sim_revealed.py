"""simulated patient: which facts each reply revealed, which the message asked, and when

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 13:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sim_reply",
        sa.Column("asked_topics", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
    )
    op.add_column(
        "sim_reply",
        sa.Column(
            "revealed_topics", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False
        ),
    )
    op.add_column("sim_reply", sa.Column("replied_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("sim_reply", "replied_at")
    op.drop_column("sim_reply", "revealed_topics")
    op.drop_column("sim_reply", "asked_topics")
