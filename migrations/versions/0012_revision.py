"""revision: the version of the system under test, on runs and evals

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 14:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run", sa.Column("revision", sa.Text(), nullable=True))
    op.create_index("ix_run_revision", "run", ["tenant_id", "revision", "started_at"], unique=False)
    op.add_column("eval", sa.Column("revision", sa.Text(), nullable=True))
    op.create_index(
        "ix_eval_revision", "eval", ["tenant_id", "revision", "created_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_eval_revision", table_name="eval")
    op.drop_column("eval", "revision")
    op.drop_index("ix_run_revision", table_name="run")
    op.drop_column("run", "revision")
