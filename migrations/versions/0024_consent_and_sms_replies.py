"""sim_reply.decisions: the simulated patient's agreement or refusal of each action a
staff message proposed (the `consent` expectation reads them); run.sms_reply_url: where
the simulated patient's SMS replies are posted, in Twilio's inbound format

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03 14:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sim_reply",
        sa.Column("decisions", JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
    )
    op.add_column("run", sa.Column("sms_reply_url", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "sms_reply_url")
    op.drop_column("sim_reply", "decisions")
