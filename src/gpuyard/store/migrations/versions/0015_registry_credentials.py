"""registry_credentials: tenants' logins to container registries, passwords sealed
(store/registries.py, docs/images.md)

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "registry_credentials",
        sa.Column("tenant", sa.String(64), sa.ForeignKey("tenants.name", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("registry", sa.String(253), primary_key=True),
        sa.Column("username", sa.String(254), nullable=False),
        sa.Column("password_sealed", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("registry_credentials")
