"""`tapebot run` as a real process (Telegram through the fake Bot API server): started, killed
with SIGKILL, started again on the same home."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tests.fakes.telegram_api import FakeBotAPI

ROOT = Path(__file__).resolve().parents[2]


class BotProcess:
    """`tapebot run`, started and killed."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.proc: asyncio.subprocess.Process | None = None
        self.runs = 0

    async def start(self, api: FakeBotAPI) -> None:
        polls = len(api.calls_to("getUpdates"))
        self.runs += 1
        with open(self.home.parent / f"run{self.runs}.log", "wb") as log:  # the child keeps its copy
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot.cli", "run",
                cwd=ROOT, env=self.env, stdout=asyncio.subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        await api.wait_for(lambda: len(api.calls_to("getUpdates")) > polls, timeout=60)

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        return self.proc.returncode or 0
