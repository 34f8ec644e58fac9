"""jobs: where a queued job stands in its tenant's queue, and when it is expected to start

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("pending_position", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("pending_queue_length", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("pending_eta", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("pending_eta")
        batch_op.drop_column("pending_queue_length")
        batch_op.drop_column("pending_position")
