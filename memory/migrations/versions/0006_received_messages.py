"""received messages kept until they are in their session's history

`processed_updates.pending` holds a chat message from the moment its update is recorded (the
de-duplication row, in the same INSERT) until the transaction that writes it into its session's
history clears it. A message that arrived during a running turn, or waited behind an approval, is
then still there after a crash or a restart, and is answered instead of lost.

Revision ID: 0006_received_messages
Revises: 0005_session_indexes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_received_messages"
down_revision = "0005_session_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("processed_updates", sa.Column("pending", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("processed_updates") as batch:
        batch.drop_column("pending")
