"""board headline index: a mode's runs on one revision, by scenario and hash in start
order, with their status, so the console home page's board headline (the state of each
scenario on the default revision) is one index-only scan of that revision's rows, in the
order the states are read, instead of a walk of every revision in ix_run_board

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-03 15:10:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_run_board_revision",
        "run",
        ["tenant_id", "mode", "revision", "scenario_id", "scenario_hash", "started_at", "id"],
        postgresql_include=["status"],
    )


def downgrade() -> None:
    op.drop_index("ix_run_board_revision", table_name="run")
