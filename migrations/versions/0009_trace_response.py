"""trace_call keeps the response body of run-attributed calls (capped), for grounding

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 14:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("trace_call", sa.Column("response", sa.Text(), nullable=True))
    op.add_column("trace_call", sa.Column("response_bytes", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("trace_call", "response_bytes")
    op.drop_column("trace_call", "response")
