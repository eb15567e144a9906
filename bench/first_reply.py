"""First reply after `tapebot run` starts, against the later ones.

    python -m bench.first_reply [--runs 5] [--later 5] [--vendor openai|anthropic] [--root OTHER_TREE]

Each run starts the real bot (`python -m bot.cli run`, a temporary TAPEBOT_HOME) with Telegram
pointed at the fake Bot API (tests/fakes/telegram_api.py, `[telegram] api_base_url`) and the model
at the scripted LLM server (tests/fakes/llm_server.py), which answers at once. As soon as the bot
polls for updates (it is up), a user's message is pushed; the time until the bot's answer reaches
the Bot API is the first reply. Then `--later` more messages, one at a time, each timed the same
way. The vendor SDK is imported in the background from the start (`App.warm_sdks`); without that
the first reply paid the import (1.3–2.1 s against 0.05–0.12 s for the later ones, as measured
before that was added).

Prints, per tree, the medians over `--runs` runs of: start to ready, the first reply, the later
replies, and first / later (target ≤ 1.5); then the bot's CPU time (all its threads, Linux
schedstat) during the first reply and during a later one — steadier than wall times on a busy
machine. `--root` times another checkout too (e.g. the commit before a change), interleaved run
by run so both see the same load. Prints figures; asserts nothing.

Measured 2026-12-03 on the 2-core machine, interleaved with the code before the scheduler's split
start (`AppScheduler.prepare` before the chats open, `open` after; bot/app.py `App.start`), openai
SDK, load average 0.7–1.3 (others' jobs running): over 11 runs each, the first reply 17.9 ms
against later ones 16.8 ms (ratio 1.04) — before, 35.1 ms against 17.1 ms (ratio 2.06); the bot's
CPU during the first reply 15.2 ms against 13.6 ms for a later one (ratio 1.10) — before, 32.4 ms
against 14.9 ms (ratio 2.39). Two more 7-run A/Bs the same hour: ratio 1.03 and 1.24 (CPU 1.16,
1.19; the latter before the warm-up's open-turn read) against 1.94 and 1.99 (CPU 2.23, 2.46). Start
to ready 1.85–1.88 s both. With `--vendor anthropic` (7 runs): 17.4 ms against 11.4 ms (ratio 1.52,
CPU 1.36) — before, 31.7 ms against 11.8 ms (ratio 2.38, CPU 3.07): its later replies are cheaper,
so the same fixed extras weigh more.
Earlier the same day, before the split: 39.0 ms against 16.8 ms (ratio 2.37) with the cold-cache
warm-up (`App.warm_caches`, bot/parts.py `cache_warmer`), 47.9 ms against 17.0 ms (2.87) without;
BUSY (load 10–12): 520 ms against 219 ms, and before the SDK warm-up 1,990 ms against 232 ms.
What the first reply paid before the split: the scheduler's start (job store and engine, its
first statements, its I/O thread, the lease, syncing the stored schedules into jobs) ran after the
chats opened, i.e. while the first message was handled. Now all of that is done before the chats
open; `open` only resumes APScheduler (lease holder only), whose first pass costs what a later one
does (~0.8 ms of the scheduler's I/O thread: its two queries are compiled by `prepare`; 1.7 ms
before). Everything else the start-up leaves running was checked with timestamps in the bot: the
cache warm-up ends 11–27 ms before the chats open, `tasks.start()` (3–7 ms of loop CPU: lost tasks
marked, undelivered notices sent) ends 3–7 ms after they open and before the first message is
handled (7–17 ms after) — neither overlaps it here. What a first reply still pays (a cProfile diff
of the first and a later reply, both vendors): a new chat's own writes (its `chats` row read, then
written twice, its session created: 7 statements more), which no warm-up can do in advance; a new
TCP connection to the model's endpoint (a warm-up must not reach it); and the SDK's platform
probe (`_utils._sync.to_thread`), which the rehearsal's stand-in client did for itself only.
2026-12-06, without the rehearsed model call at start (busy: load average 6.5–8.1, 5 runs,
interleaved with the commit before): first reply 87.3 against 61.2 ms, later ones 52.8 against 51.7
ms (first / later 1.65 against 1.14); the bot's CPU during the first reply 25.2 against 16.8 ms.
The ~8 ms of CPU it saved, once per process, is under 1% of a 1 s model round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._env import add_runs_arg, footer, header, spread  # noqa: E402
from tests.fakes.llm_server import Reply, ScriptedLLMServer  # noqa: E402
from tests.fakes.telegram_api import FakeBotAPI  # noqa: E402

TOKEN = "123456:TEST-token-abcdef"
USER = CHAT = 1001
TARGET = 1.5


def env_for(home: Path, llm: ScriptedLLMServer, vendor: str, root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TAPEBOT_") and not k.endswith(("_API_KEY", "_BASE_URL", "_BOT_TOKEN"))
    }
    env.update(TAPEBOT_HOME=str(home), PYTHONPATH=str(root), TELEGRAM_BOT_TOKEN=TOKEN)
    if vendor == "openai":
        env.update(OPENAI_API_KEY="sk-bench-0123456789", OPENAI_BASE_URL=llm.openai_base_url)
    else:
        env.update(ANTHROPIC_API_KEY="sk-ant-bench-0123456789", ANTHROPIC_BASE_URL=llm.url)
    return env


def cpu_ns(pid: int) -> int:
    """CPU time the process's threads have used so far, in ns (Linux `schedstat`; 0 elsewhere):
    what a reply costs the bot whatever else the machine runs."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended meanwhile
    except OSError:
        return 0
    return total


Run = tuple[float, float, list[float], float, list[float]]


async def one_run(root: Path, vendor: str, later: int) -> Run:
    """(start to ready, first reply, later replies) in seconds for one fresh `tapebot run`, then
    the bot's CPU seconds during the first reply and during each later one."""
    api = FakeBotAPI(token=TOKEN)
    await api.serve()
    try:
        async with ScriptedLLMServer() as llm:
            llm.default = Reply("ok")
            with tempfile.TemporaryDirectory() as tmp:
                home = Path(tmp) / "home"
                home.mkdir()
                (home / "config.toml").write_text(
                    f'[telegram]\napi_base_url = "{api.base_url}"\nallowed_users = [{USER}]\n',
                    encoding="utf-8",
                )
                t0 = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bot.cli",
                    "run",
                    cwd=root,
                    env=env_for(home, llm, vendor, root),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                try:
                    await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=120)
                    ready = time.perf_counter() - t0
                    replies, cpu = [], []
                    for i in range(later + 1):
                        before = len(api.sent(CHAT))
                        t, c = time.perf_counter(), cpu_ns(proc.pid)
                        api.push_text(CHAT, f"hello {i}", user_id=USER)
                        await api.wait_for(
                            lambda n=before: any(m.get("text") == "ok" for m in api.sent(CHAT)[n:]),
                            timeout=120,
                        )
                        replies.append(time.perf_counter() - t)
                        cpu.append((cpu_ns(proc.pid) - c) / 1e9)
                finally:
                    if proc.returncode is None:
                        proc.terminate()
                        try:
                            await asyncio.wait_for(proc.wait(), 30)
                        except TimeoutError:
                            proc.kill()
                            await proc.wait()
                return ready, replies[0], replies[1:], cpu[0], cpu[1:]
    finally:
        await api.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    add_runs_arg(parser)
    parser.add_argument("--later", type=int, default=5, help="replies timed after the first")
    parser.add_argument("--vendor", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--root", type=Path, help="also time this checkout (before/after, interleaved)")
    args = parser.parse_args()
    header(f"first reply after `tapebot run` starts ({args.vendor} SDK, fake Telegram, scripted model)")
    trees = {"this tree": ROOT, **({str(args.root): args.root.resolve()} if args.root else {})}
    got: dict[str, list[Run]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, root in trees.items():
            got[name].append(asyncio.run(one_run(root, args.vendor, args.later)))
    for name, runs in got.items():
        ready = [r[0] for r in runs]
        first = [r[1] for r in runs]
        later = [statistics.median(r[2]) for r in runs]
        ratio = [f / max(lat, 1e-9) for f, lat in zip(first, later, strict=True)]
        med = statistics.median(ratio)
        print(f"-- {name}")
        print(
            f"start to ready (first getUpdates): median {statistics.median(ready):.2f} s {spread(ready, 1, ' s')}"
        )
        print(f"first reply:  median {statistics.median(first) * 1000:7.1f} ms {spread(first, 1000, ' ms')}")
        print(f"later replies (median of {args.later} per run): median {statistics.median(later) * 1000:7.1f} ms "
              f"{spread(later, 1000, ' ms')}")  # fmt: skip
        print(
            f"first / later: median {med:.2f} {spread(ratio)}  target ≤ {TARGET}  {'ok' if med <= TARGET else 'MISSED'}"
        )
        first_cpu = [r[3] for r in runs]
        later_cpu = [statistics.median(r[4]) for r in runs]
        if any(first_cpu):
            cpu_ratio = [f / max(lat, 1e-9) for f, lat in zip(first_cpu, later_cpu, strict=True)]
            print(f"bot CPU during the first reply: median {statistics.median(first_cpu) * 1000:.1f} ms, "
                  f"a later one: {statistics.median(later_cpu) * 1000:.1f} ms; first / later: median "
                  f"{statistics.median(cpu_ratio):.2f} {spread(cpu_ratio)} (steadier on a busy machine)")  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
