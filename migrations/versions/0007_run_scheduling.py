"""run scheduling setting (strict or lenient), recorded at start

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 12:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run",
        sa.Column("scheduling", sa.Text(), server_default="strict", nullable=False),
    )
    op.create_check_constraint("scheduling", "run", "scheduling IN ('strict', 'lenient')")


def downgrade() -> None:
    op.drop_column("run", "scheduling")
