"""eval_item.run_status: the status of the item's run, kept by triggers, so that the evals
list counts a page's items without reading their runs (5,000 run rows for a page of fifty
100-run evals)

Two triggers keep it, so that neither the runs nor the evals code has to (the runs
feature does not know evals exist): a run inserted or changing status copies its status
onto the items naming it, and an item given a run (or none) reads that run's status.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01 16:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_FUNCTION = """
CREATE FUNCTION eval_item_run_status_from_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE eval_item SET run_status = NEW.status
    WHERE tenant_id = NEW.tenant_id AND run_id = NEW.id
        AND run_status IS DISTINCT FROM NEW.status;
    RETURN NULL;
END $$
"""

ITEM_FUNCTION = """
CREATE FUNCTION eval_item_run_status_of_item() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.run_id IS NULL THEN
        NEW.run_status := NULL;
    ELSE
        NEW.run_status := (SELECT r.status FROM run r
            WHERE r.tenant_id = NEW.tenant_id AND r.id = NEW.run_id);
    END IF;
    RETURN NEW;
END $$
"""


def upgrade() -> None:
    op.add_column("eval_item", sa.Column("run_status", sa.Text(), nullable=True))
    op.execute(RUN_FUNCTION)
    op.execute(ITEM_FUNCTION)
    op.execute(
        """CREATE TRIGGER tr_run_status_to_eval_item AFTER INSERT ON run
        FOR EACH ROW EXECUTE FUNCTION eval_item_run_status_from_run()"""
    )
    op.execute(
        """CREATE TRIGGER tr_run_status_change_to_eval_item AFTER UPDATE OF status ON run
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
        EXECUTE FUNCTION eval_item_run_status_from_run()"""
    )
    op.execute(
        """CREATE TRIGGER tr_eval_item_run_status BEFORE INSERT OR UPDATE OF run_id
        ON eval_item FOR EACH ROW EXECUTE FUNCTION eval_item_run_status_of_item()"""
    )
    op.execute(
        """UPDATE eval_item i SET run_status = r.status FROM run r
        WHERE r.tenant_id = i.tenant_id AND r.id = i.run_id"""
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER tr_eval_item_run_status ON eval_item")
    op.execute("DROP TRIGGER tr_run_status_change_to_eval_item ON run")
    op.execute("DROP TRIGGER tr_run_status_to_eval_item ON run")
    op.execute("DROP FUNCTION eval_item_run_status_of_item()")
    op.execute("DROP FUNCTION eval_item_run_status_from_run()")
    op.drop_column("eval_item", "run_status")
