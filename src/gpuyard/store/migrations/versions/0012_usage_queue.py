"""usage_queue: queued job-seconds per tenant per UTC hour, for the queue length over time
(docs/accounting.md)

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_queue",
        sa.Column("hour", sa.Float(), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("queued_job_seconds", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("usage_queue")
