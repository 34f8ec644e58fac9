"""leader_lease: which server leads (runs the controller), its term and its heartbeat
(docs/ha.md)

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leader_lease",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("term", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("address", sa.String(256), nullable=False),
        sa.Column("backend_pid", sa.Integer(), nullable=True),
        sa.Column("renewed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leader_lease")
