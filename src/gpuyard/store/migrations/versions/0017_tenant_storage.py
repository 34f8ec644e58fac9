"""tenant_storage: tenants' named storage, what a job's `storage` (OpenPAI's teamwise_storage)
mounts by name (store/storage.py, docs/openpai.md)

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant_storage",
        sa.Column("tenant", sa.String(64), sa.ForeignKey("tenants.name", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("path", sa.String(4096), nullable=False),
        sa.Column("mount_point", sa.String(1024), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("tenant_storage")
