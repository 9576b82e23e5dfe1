"""usage indexes: the runs decided (passed, failed, timed out) per tenant by the time
they ended, and the model calls' purpose and tokens in their time index, so the per-day
counts of GET /api/usage read indexes alone

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_run_decided",
        "run",
        ["tenant_id", "finished_at"],
        postgresql_include=["status"],
        postgresql_where=sa.text("status IN ('passed', 'failed', 'timed_out')"),
    )
    op.drop_index("ix_llm_call_at", table_name="llm_call")
    op.create_index(
        "ix_llm_call_at",
        "llm_call",
        ["tenant_id", "at"],
        postgresql_include=["purpose", "prompt_tokens", "completion_tokens"],
    )


def downgrade() -> None:
    op.drop_index("ix_llm_call_at", table_name="llm_call")
    op.create_index("ix_llm_call_at", "llm_call", ["tenant_id", "at"])
    op.drop_index("ix_run_decided", table_name="run")
