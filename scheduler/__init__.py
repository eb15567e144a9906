"""Scheduling: one APScheduler 3 `AsyncIOScheduler` per database (lease), per-chat daily briefs in
their own time zones, and housekeeping jobs.

    specs    brief specs, `/brief` parsing, DailyTrigger and the pure schedule maths
    store    Schedule model; schedules, run claims, lease and chat zones on the project database
    jobs     what the jobs do: a brief (claim, delivery with retries, outcome), a housekeeping chore
    app      AppScheduler: jobs built from `schedules`, next run times, lease, reconcile, prepare/open/stop
    service  ScheduleService: what /brief, /status and the tools call
    tools    manage_schedule / list_schedules for the model
"""
