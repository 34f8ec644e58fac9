"""jobs: platform failures in a row and the time before which a backed-off job is not placed

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(
            sa.Column("platform_failures", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("not_before", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("not_before")
        batch_op.drop_column("platform_failures")
