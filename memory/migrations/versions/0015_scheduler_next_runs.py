"""scheduler_next_runs replaces APScheduler's apscheduler_jobs

The scheduler no longer keeps a second copy of each schedule in APScheduler's SQLAlchemy job store
(a pickled job per brief): APScheduler keeps its jobs in memory, built from `schedules`, and only
each job's next firing is stored, in `scheduler_next_runs`. The stored next run times are carried
over, so an upgrade neither skips nor repeats a brief. A downgrade leaves `apscheduler_jobs` empty:
the older scheduler re-registers every active schedule at its next start.

Revision ID: 0015_scheduler_next_runs
Revises: 0014_column_limits
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0015_scheduler_next_runs"
down_revision = "0014_column_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    next_runs = op.create_table(
        "scheduler_next_runs",
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("next_run_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_scheduler_next_runs"),
    )
    assert next_runs is not None
    old = sa.table("apscheduler_jobs", sa.column("id", sa.Unicode(191)), sa.column("next_run_time", sa.Float))
    conn = op.get_bind()
    rows = [
        {"job_id": job_id, "next_run_at": datetime.fromtimestamp(when, UTC)}
        for job_id, when in conn.execute(sa.select(old.c.id, old.c.next_run_time))
        if when is not None and len(job_id) <= 64
    ]
    if rows:
        op.bulk_insert(next_runs, rows)
    op.drop_index("ix_apscheduler_jobs_next_run_time", table_name="apscheduler_jobs")
    op.drop_table("apscheduler_jobs")


def downgrade() -> None:
    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(191), nullable=False),
        sa.Column("next_run_time", sa.Float(25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_apscheduler_jobs_next_run_time", "apscheduler_jobs", ["next_run_time"])
    op.drop_table("scheduler_next_runs")
