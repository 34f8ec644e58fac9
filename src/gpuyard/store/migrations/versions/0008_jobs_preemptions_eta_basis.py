"""jobs: how many times each job was preempted (counted from its events so far), and what
its estimated start rests on

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# a preemption is a job's move back to QUEUED with reason Preempted (store/jobs.py: move)
COUNT_PREEMPTIONS = """
UPDATE jobs SET preemptions = (
    SELECT count(*) FROM events
    WHERE events.job_id = jobs.id AND events.task IS NULL
      AND events.to_state = 'QUEUED' AND events.reason = 'Preempted'
)
"""


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(
            sa.Column("preemptions", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("pending_eta_basis", sa.Text(), nullable=True))
    op.execute(COUNT_PREEMPTIONS)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("pending_eta_basis")
        batch_op.drop_column("preemptions")
