"""eval completed backfill: mark the evals that had already finished before eval events
existed as completed (when their last run finished), so the first tick after the upgrade
does not send `eval.completed` (and `eval.regressed`) for every eval of the past

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 16:40:00.000000
"""

# Data only: no schema change.

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """UPDATE eval e SET completed_at = coalesce(
            (SELECT max(r.finished_at) FROM eval_item i
                JOIN run r ON r.tenant_id = i.tenant_id AND r.id = i.run_id
                WHERE i.tenant_id = e.tenant_id AND i.eval_id = e.id),
            e.created_at)
        WHERE e.completed_at IS NULL AND e.cancelled_at IS NULL AND NOT EXISTS (
            SELECT 1 FROM eval_item i WHERE i.tenant_id = e.tenant_id AND i.eval_id = e.id
                AND (i.state IN ('queued', 'starting') OR EXISTS (
                    SELECT 1 FROM run r WHERE r.tenant_id = i.tenant_id AND r.id = i.run_id
                        AND r.status = 'live')))"""
    )


def downgrade() -> None:
    # Nothing to undo in the schema; the marks stay (unsetting them would make the events
    # of every past eval go out again).
    pass
