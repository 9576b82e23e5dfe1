"""run patient_driver: who answers the staff's messages in a patientSim run

`sim` (the simulated patient, the default) or `human` (a person types the replies on the
run page).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 14:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run",
        sa.Column("patient_driver", sa.Text(), server_default="sim", nullable=False),
    )
    op.create_check_constraint("patient_driver", "run", "patient_driver IN ('sim', 'human')")


def downgrade() -> None:
    op.drop_column("run", "patient_driver")
