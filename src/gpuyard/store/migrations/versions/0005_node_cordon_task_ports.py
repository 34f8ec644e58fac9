"""nodes: address, cordon/drain state; task_ports: ports reserved for tasks on their nodes

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.add_column(sa.Column("address", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("cordon", sa.String(16), nullable=True))
        batch_op.add_column(sa.Column("cordon_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("cordon_by", sa.String(64), nullable=True))
        batch_op.add_column(sa.Column("cordon_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("drain_deadline", sa.Float(), nullable=True))
    op.create_table(
        "task_ports",
        sa.Column("node", sa.String(128), primary_key=True),
        sa.Column("port", sa.Integer(), primary_key=True),
        sa.Column(
            "task_id",
            sa.Integer(),
            sa.ForeignKey("tasks.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("label", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("task_ports")
    with op.batch_alter_table("nodes") as batch_op:
        for name in ("drain_deadline", "cordon_at", "cordon_by", "cordon_reason", "cordon"):
            batch_op.drop_column(name)
        batch_op.drop_column("address")
