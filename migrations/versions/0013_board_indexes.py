"""board indexes: a mode's runs by time (the default revision, the revision picker) and
a scenario's runs at its hash per revision (the board's per-revision chart, index-only)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 15:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_run_mode", "run", ["tenant_id", "mode", "started_at"], postgresql_include=["revision"]
    )
    op.create_index(
        "ix_run_board",
        "run",
        ["tenant_id", "mode", "scenario_id", "scenario_hash", "revision"],
        postgresql_include=["status", "started_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_run_board", table_name="run")
    op.drop_index("ix_run_mode", table_name="run")
