"""trace_call.request: the request body of a recorded call (its first 256 KiB), so an
`api_call` expectation can check what a call asked (`where`), not only its path

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-01 23:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("trace_call", sa.Column("request", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("trace_call", "request")
