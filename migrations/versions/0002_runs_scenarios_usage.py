"""runs, scenarios, usage

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 18:13:10.944758
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("scenario_id", sa.Text(), nullable=False),
        sa.Column("scenario_version", sa.Integer(), nullable=False),
        sa.Column("scenario_hash", sa.Text(), nullable=False),
        sa.Column("builtin", sa.Boolean(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False),
        sa.Column("variant", sa.Text(), nullable=True),
        sa.Column("label", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("brief", sa.Text(), nullable=True),
        sa.Column("fixture", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("expectations", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("graded_change_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("graded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("progress", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("verdict", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_run")),
    )
    op.create_index("ix_run_label", "run", ["tenant_id", "label"], unique=False)
    op.create_index(
        "ix_run_live",
        "run",
        ["tenant_id", "id"],
        unique=False,
        postgresql_where=sa.text("status = 'live'"),
    )
    op.create_index("ix_run_started", "run", ["tenant_id", "started_at"], unique=False)
    op.create_table(
        "run_ref",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "ref", name=op.f("pk_run_ref")),
    )
    op.create_index("ix_run_ref_run", "run_ref", ["tenant_id", "run_id"], unique=False)
    op.create_table(
        "scenario",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("hash", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", "version", name=op.f("pk_scenario")),
    )
    op.create_table(
        "usage_counter",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("writes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "day", "shard", name=op.f("pk_usage_counter")),
    )
    op.add_column("fhir_history", sa.Column("source", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("fhir_history", "source")
    op.drop_table("usage_counter")
    op.drop_table("scenario")
    op.drop_index("ix_run_ref_run", table_name="run_ref")
    op.drop_table("run_ref")
    op.drop_index("ix_run_started", table_name="run")
    op.drop_index("ix_run_live", table_name="run", postgresql_where=sa.text("status = 'live'"))
    op.drop_index("ix_run_label", table_name="run")
    op.drop_table("run")
