"""background tasks and the scheduler: background_tasks, schedules, schedule_runs, scheduler_leases,
chat_timezones, apscheduler_jobs

Revision ID: 0004_tasks_scheduler
Revises: 0003_markets
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.models import UTCDateTime

revision = "0004_tasks_scheduler"
down_revision = "0003_markets"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "background_tasks",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("arguments", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stage", sa.String(200), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("percent", sa.Float(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("attachments", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("timeout", sa.Float(), nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("heartbeat_at", UTCDateTime(), nullable=True),
        sa.Column("notified", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_background_tasks"),
    )
    op.create_index("ix_background_tasks_session_id", "background_tasks", ["session_id"])
    op.create_index("ix_background_tasks_chat_key", "background_tasks", ["chat_key"])
    op.create_index("ix_background_tasks_status", "background_tasks", ["status"])
    op.create_index("ix_background_tasks_session_created", "background_tasks", ["session_id", "created_at"])

    op.create_table(
        "schedules",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("spec", sa.String(64), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("last_run_at", UTCDateTime(), nullable=True),
        sa.Column("last_status", sa.String(64), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_chat_key", "schedules", ["chat_key"])

    op.create_table(
        "schedule_runs",
        sa.Column("schedule_id", sa.String(32), nullable=False),
        sa.Column("run_date", sa.String(10), nullable=False),
        sa.Column("scheduled_for", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.PrimaryKeyConstraint("schedule_id", "run_date", name="pk_schedule_runs"),
    )
    op.create_index("ix_schedule_runs_started", "schedule_runs", ["started_at"])

    op.create_table(
        "scheduler_leases",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_scheduler_leases"),
    )

    op.create_table(
        "chat_timezones",
        sa.Column("chat_key", sa.String(255), nullable=False),
        sa.Column("tz", sa.String(64), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("chat_key", name="pk_chat_timezones"),
    )

    # APScheduler 3.x SQLAlchemyJobStore's table, exactly as it would create it (it skips creation
    # when the table exists). Jobs are pickled; see scheduler/app_scheduler.py.
    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(191), nullable=False),
        sa.Column("next_run_time", sa.Float(25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_apscheduler_jobs_next_run_time", "apscheduler_jobs", ["next_run_time"])


def downgrade() -> None:
    op.drop_index("ix_apscheduler_jobs_next_run_time", table_name="apscheduler_jobs")
    op.drop_table("apscheduler_jobs")
    op.drop_table("chat_timezones")
    op.drop_table("scheduler_leases")
    op.drop_index("ix_schedule_runs_started", table_name="schedule_runs")
    op.drop_table("schedule_runs")
    op.drop_index("ix_schedules_chat_key", table_name="schedules")
    op.drop_table("schedules")
    op.drop_index("ix_background_tasks_session_created", table_name="background_tasks")
    op.drop_index("ix_background_tasks_status", table_name="background_tasks")
    op.drop_index("ix_background_tasks_chat_key", table_name="background_tasks")
    op.drop_index("ix_background_tasks_session_id", table_name="background_tasks")
    op.drop_table("background_tasks")
