"""usage roll-up (usage_hours, usage_jobs; tasks.usage_to/usage_done) and e-mail
notifications (user_notify, mail_settings): docs/accounting.md, docs/observability.md

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch_op:
        batch_op.add_column(sa.Column("usage_to", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("usage_done", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.create_index("ix_tasks_usage_done", ["usage_done"])
    _usage_tables()
    _mail_tables()


def _usage_tables() -> None:
    op.create_table(
        "usage_hours",
        sa.Column("hour", sa.Float(), primary_key=True),
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("gpu_seconds", sa.Float(), nullable=False),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("lost_gpu_seconds", sa.Float(), nullable=False),
    )
    op.create_index("ix_usage_hours_tenant_hour", "usage_hours", ["tenant", "hour"])
    op.create_table(
        "usage_jobs",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("first_start", sa.Float(), nullable=False, index=True),
        sa.Column("wait_s", sa.Float(), nullable=False),
    )


def _mail_tables() -> None:
    op.create_table(
        "user_notify",
        sa.Column(
            "user", sa.String(64), sa.ForeignKey("users.name", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("email", sa.String(254), nullable=True),
        sa.Column("notify", sa.String(16), nullable=False),
    )
    op.create_table(
        "mail_settings",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("host", sa.String(253), nullable=True),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("sender", sa.String(254), nullable=True),
        sa.Column("starttls", sa.Boolean(), nullable=False),
        sa.Column("username", sa.String(254), nullable=True),
        sa.Column("password_sealed", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=True),
    )


def downgrade() -> None:
    for table in ("mail_settings", "user_notify", "usage_jobs", "usage_hours"):
        op.drop_table(table)
    with op.batch_alter_table("tasks") as batch_op:
        batch_op.drop_index("ix_tasks_usage_done")
        batch_op.drop_column("usage_done")
        batch_op.drop_column("usage_to")
