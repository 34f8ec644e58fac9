"""jobs: when a session (exec, port-forward, `gpuyard run`'s) was last seen open on the job;
an interactive job with none for its tenant's `interactiveIdleTimeoutS` is stopped
(docs/interactive.md)

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("session_seen_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("session_seen_at")
