"""jobs.rev and the revisions counter: each transaction that changes a job row as the
controller acts on it gives the rows it touched the counter's next number, so that the
controller reads only what changed since it last looked (store/revisions.py)

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "revisions",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
    )
    op.execute("INSERT INTO revisions (name, n) VALUES ('jobs', 0)")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("rev", sa.BigInteger(), nullable=False, server_default="0"))
        batch_op.create_index("ix_jobs_rev", ["rev"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_index("ix_jobs_rev")
        batch_op.drop_column("rev")
    op.drop_table("revisions")
