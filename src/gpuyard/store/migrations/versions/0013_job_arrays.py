"""job_arrays (a job array's parent) and jobs.array_id / array_index (its children)
(docs/controller.md, Job arrays and dependencies)

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_arrays",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("expression", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("max_running", sa.Integer(), nullable=True),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("stop_requested", sa.String(32), nullable=True),
    )
    op.create_index("ix_job_arrays_tenant", "job_arrays", ["tenant"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("array_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch.create_index("ix_jobs_array_id", ["array_id"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_array_id")
        batch.drop_column("array_index")
        batch.drop_column("array_id")
    op.drop_index("ix_job_arrays_tenant", "job_arrays")
    op.drop_table("job_arrays")
