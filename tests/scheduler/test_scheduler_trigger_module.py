"""`DailyTrigger` is a virtual subclass of APScheduler's `BaseTrigger` (registered by the scheduler)
so the schedule tools and specs load without APScheduler (issue 21); the job store's pickles are
unchanged."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from apscheduler.triggers.base import BaseTrigger

import scheduler.app_scheduler  # noqa: F401  (registers the trigger)
from scheduler.specs import DailyTrigger

ROOT = Path(__file__).resolve().parents[2]

# pickle.dumps(DailyTrigger("weekdays", 8, 30, "Asia/Shanghai", 17)) when it inherited BaseTrigger
STORED = (
    b"\x80\x04\x95\x84\x00\x00\x00\x00\x00\x00\x00\x8c\x0fscheduler.specs\x94\x8c\x0cDailyTrigger"
    b"\x94\x93\x94)\x81\x94}\x94(\x8c\x07version\x94K\x02\x8c\x04days\x94\x8c\x08weekdays\x94\x8c"
    b"\x04hour\x94K\x08\x8c\x06minute\x94K\x1e\x8c\x08timezone\x94\x8c\rAsia/Shanghai\x94\x8c\x06"
    b"second\x94K\x11ub."
)


def test_the_trigger_is_an_apscheduler_trigger_and_pickles_as_before():
    assert issubclass(DailyTrigger, BaseTrigger)
    trigger = DailyTrigger("weekdays", 8, 30, "Asia/Shanghai", 17)
    assert pickle.dumps(trigger, protocol=4) == STORED
    assert pickle.loads(STORED) == trigger


def test_the_schedule_tools_load_without_apscheduler():
    code = "import sys, scheduler.tools, scheduler.service; print('apscheduler' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
