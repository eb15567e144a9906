"""Scheduling: one APScheduler 3 `AsyncIOScheduler` per database (lease), per-chat daily briefs in
their own time zones, and housekeeping jobs.

    specs    brief specs, `/brief` parsing, DailyTrigger and the pure schedule maths
    store    Schedule model; schedules, run claims, lease and chat zones on the project database
    jobs     job callbacks (importable, plain arguments) and the brief runner with retries
    app      AppScheduler: job store, I/O thread, lease, reconcile, prepare/open (start)/stop
    service  ScheduleService: what /brief, /status and the tools call
    tools    manage_schedule / list_schedules for the model
"""
