"""replicas: the chat inbox, and what a lease is for

`replica_inbox` files each stored inbound message under its chat, so the replica holding the
chat's lease takes it up in arrival order; `scheduler_leases.subject` keeps a chat lease's chat key
(its name is a hash), so a survivor knows which chat a dead replica's expired lease was for.

Revision ID: 0018_replica_inbox
Revises: 0017_drop_approval_rules
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_replica_inbox"
down_revision = "0017_drop_approval_rules"
branch_labels = None
depends_on = None

BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "replica_inbox",
        sa.Column("id", BigIntPK, autoincrement=True, nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("update_id", sa.String(128), nullable=False),
        sa.Column("parked", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_replica_inbox"),
        sa.UniqueConstraint("platform", "update_id", name="uq_replica_inbox_platform"),
    )
    op.create_index("ix_replica_inbox_chat_key", "replica_inbox", ["chat_key"])
    with op.batch_alter_table("scheduler_leases") as batch:
        batch.add_column(sa.Column("subject", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scheduler_leases") as batch:
        batch.drop_column("subject")
    op.drop_index("ix_replica_inbox_chat_key", table_name="replica_inbox")
    op.drop_table("replica_inbox")
