"""jobs: when the current attempt was queued, and what it borrows beyond its tenant's quota

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("queued_at", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("borrowed", sa.Text(), nullable=False, server_default="[]")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("borrowed")
        batch_op.drop_column("queued_at")
