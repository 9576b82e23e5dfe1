"""run.settle_until: when the quiet a passing grade waits for ends, so the grading tick
ends the run even if the deferred job that would have was lost

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run", sa.Column("settle_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "settle_until")
