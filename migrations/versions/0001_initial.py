"""initial

Revision ID: 0001
Revises:
Create Date: 2026-11-29 17:36:16.029750
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fhir_date",
        sa.Column("row_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("resource_type", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("param", sa.Text(), nullable=False),
        sa.Column("low", sa.DateTime(timezone=True), nullable=False),
        sa.Column("high", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_fhir_date")),
    )
    op.create_index(
        "ix_fhir_date_high",
        "fhir_date",
        ["tenant_id", "resource_type", "param", "high"],
        unique=False,
    )
    op.create_index(
        "ix_fhir_date_low",
        "fhir_date",
        ["tenant_id", "resource_type", "param", "low"],
        unique=False,
    )
    op.create_index(
        "ix_fhir_date_resource", "fhir_date", ["tenant_id", "resource_type", "id"], unique=False
    )
    op.create_table(
        "fhir_history",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("resource_type", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("interaction", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("resource", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.PrimaryKeyConstraint(
            "tenant_id", "resource_type", "id", "version_id", name=op.f("pk_fhir_history")
        ),
    )
    op.create_index(
        "ix_fhir_history_run",
        "fhir_history",
        ["tenant_id", "run_id"],
        unique=False,
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.create_index(
        "ix_fhir_history_type_updated",
        "fhir_history",
        ["tenant_id", "resource_type", "last_updated"],
        unique=False,
    )
    op.create_index(
        "ix_fhir_history_updated", "fhir_history", ["tenant_id", "last_updated"], unique=False
    )
    op.create_table(
        "fhir_resource",
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("resource_type", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("last_updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("resource", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("tokens", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("refs", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("strings", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("all_refs", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "sort", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.PrimaryKeyConstraint("tenant_id", "resource_type", "id", name=op.f("pk_fhir_resource")),
    )
    op.create_index(
        "ix_fhir_resource_all_refs",
        "fhir_resource",
        ["all_refs"],
        unique=False,
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    )
    op.create_index(
        "ix_fhir_resource_refs",
        "fhir_resource",
        ["refs"],
        unique=False,
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    )
    op.create_index(
        "ix_fhir_resource_run",
        "fhir_resource",
        ["tenant_id", "run_id"],
        unique=False,
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.create_index(
        "ix_fhir_resource_strings",
        "fhir_resource",
        ["strings"],
        unique=False,
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    )
    op.create_index(
        "ix_fhir_resource_tokens",
        "fhir_resource",
        ["tokens"],
        unique=False,
        postgresql_using="gin",
        postgresql_with={"fastupdate": "off"},
    )
    op.create_index(
        "ix_fhir_resource_updated",
        "fhir_resource",
        ["tenant_id", "resource_type", "last_updated"],
        unique=False,
    )
    op.create_table(
        "tenant",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("trace_enabled", sa.Boolean(), server_default="true", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenant")),
        sa.UniqueConstraint("name", name=op.f("uq_tenant_name")),
    )
    op.create_table(
        "trace_call",
        sa.Column("row_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.Text(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("transport", sa.Text(), nullable=False),
        sa.Column("refs", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_trace_call")),
    )
    op.create_index("ix_trace_call_at", "trace_call", ["tenant_id", "at"], unique=False)
    op.create_index("ix_trace_call_run", "trace_call", ["tenant_id", "run_id", "at"], unique=False)
    op.create_table(
        "api_key",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.Uuid(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenant.id"],
            name=op.f("fk_api_key_tenant_id_tenant"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_key")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_key_key_hash")),
    )
    op.create_index("ix_api_key_tenant_id", "api_key", ["tenant_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_api_key_tenant_id", table_name="api_key")
    op.drop_table("api_key")
    op.drop_index("ix_trace_call_run", table_name="trace_call")
    op.drop_index("ix_trace_call_at", table_name="trace_call")
    op.drop_table("trace_call")
    op.drop_table("tenant")
    op.drop_index("ix_fhir_resource_updated", table_name="fhir_resource")
    op.drop_index("ix_fhir_resource_tokens", table_name="fhir_resource", postgresql_using="gin")
    op.drop_index("ix_fhir_resource_strings", table_name="fhir_resource", postgresql_using="gin")
    op.drop_index(
        "ix_fhir_resource_run",
        table_name="fhir_resource",
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.drop_index("ix_fhir_resource_refs", table_name="fhir_resource", postgresql_using="gin")
    op.drop_index("ix_fhir_resource_all_refs", table_name="fhir_resource", postgresql_using="gin")
    op.drop_table("fhir_resource")
    op.drop_index("ix_fhir_history_updated", table_name="fhir_history")
    op.drop_index("ix_fhir_history_type_updated", table_name="fhir_history")
    op.drop_index(
        "ix_fhir_history_run",
        table_name="fhir_history",
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.drop_table("fhir_history")
    op.drop_index("ix_fhir_date_resource", table_name="fhir_date")
    op.drop_index("ix_fhir_date_low", table_name="fhir_date")
    op.drop_index("ix_fhir_date_high", table_name="fhir_date")
    op.drop_table("fhir_date")
