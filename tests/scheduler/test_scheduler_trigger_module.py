"""`DailyTrigger` is a virtual subclass of APScheduler's `BaseTrigger` (registered by the scheduler)
so the schedule tools and specs load without APScheduler."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from apscheduler.triggers.base import BaseTrigger

import scheduler.app_scheduler  # noqa: F401  (registers the trigger)
from scheduler.specs import DailyTrigger

ROOT = Path(__file__).resolve().parents[2]


def test_the_trigger_is_an_apscheduler_trigger():
    assert issubclass(DailyTrigger, BaseTrigger)
    assert isinstance(DailyTrigger("weekdays", 8, 30, "Asia/Shanghai", 17), BaseTrigger)


def test_the_schedule_tools_load_without_apscheduler():
    code = "import sys, scheduler.tools, scheduler.service; print('apscheduler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
