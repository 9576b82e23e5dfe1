"""run provenance: what a run was made of (scenario, platform, simulator, judge, revision),
recorded as it starts and completed as it is judged

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 15:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run", sa.Column("provenance", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("run", "provenance")
