"""Cold start of the CLI and resident memory of the long-running processes.

    python -m bench.startup_memory [--runs 7] [--settle 2.0] [--why]

(a) `tapebot --help`: median wall time of `python -m bot.cli --help` as a fresh subprocess
    (target < 0.3 s; a bare `python -c pass` is printed for reference).
(b) `tapebot chat` idle: the REPL as a subprocess (temporary TAPEBOT_HOME, dummy OPENAI_API_KEY,
    OPENAI_BASE_URL at a local scripted LLM server in a thread, stdin kept open); once its banner is
    on stderr and it has idled `--settle` seconds, VmRSS from /proc/<pid>/status (target < 120 MB).
(c) `tapebot run` idle with Telegram and Discord connected over real sockets to the fake Bot API
    (`[telegram] api_base_url`) and the fake Discord (`[discord] api_base_url` / `gateway_url`, its
    certificate trusted through SSL_CERT_FILE);
    sampled after getUpdates and the gateway IDENTIFY were seen, plus `--settle` (target < 150 MB).
    The database is brought to the packaged head first (`tapebot db upgrade`), as for a bot that
    has started before: the migration tooling a brand-new home loads once is not idle memory.
(d) the same process after one message on each platform has been answered, plus `--settle`
    (target < 130 MB: what a bot in use holds, not one that never talked).

VmHWM (the peak) is printed next to VmRSS. `--why` (or any missed target) adds the diagnosis, from
`python -X importtime` runs of the same commands: the slowest imports, the RSS of each group of
packages (the process's own module list replayed group by group in a fresh interpreter,
foundations first), what is not imports (data, caches), and the cost of the market directory that
the app builds at start.
Prints figures; asserts nothing.

Measured 2026-12-03 on the 2-core machine (load average ~10, RSS is not timing): (c) 119.1 MB and
(d) 121.6 MB, against 132.3 MB and 151.2 MB for the code before the start-up memory work in the same
bench (both on a database already at head); (b) 81 MB both.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._env import add_runs_arg, footer, header  # noqa: E402
from tests.fakes.discord_fake import FakeDiscord  # noqa: E402
from tests.fakes.llm_server import Reply, ScriptedLLMServer  # noqa: E402
from tests.fakes.telegram_api import FakeBotAPI  # noqa: E402

TELEGRAM_TOKEN = "123456:TEST-token-abcdef"
DISCORD_TOKEN = "discord-test-token"
HELP_TARGET, CHAT_TARGET, RUN_TARGET, USED_TARGET = 0.3, 120.0, 150.0, 130.0


def clean_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TAPEBOT_") and not k.endswith(("_API_KEY", "_BASE_URL", "_BOT_TOKEN"))
    }
    if home is not None:
        env["TAPEBOT_HOME"] = str(home)
    env.update(extra)
    return env


def proc_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of `pid`, in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


# ---- (a) cold start ------------------------------------------------------------------------------
def timed_median(args: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(args, cwd=ROOT, env=clean_env(), capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# ---- (b) chat REPL -------------------------------------------------------------------------------
class LineWatcher:
    """Collects a pipe's lines in a thread so the child never blocks on a full pipe."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            with self._seen:
                self.lines.append(raw.decode(errors="replace"))
                self._seen.notify_all()

    def wait_for(self, pred: Callable[[str], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._seen:
            while not any(pred(line) for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._seen.wait(left)
        return True


def chat_command(importtime: bool = False) -> list[str]:
    return [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "bot.cli", "chat"]


def measure_chat(settle: float, importtime: bool = False) -> tuple[dict[str, float], list[str]]:
    server = ScriptedLLMServer()
    server.default = Reply("ok")
    server.start_in_thread()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = clean_env(
                Path(tmp) / "home",
                OPENAI_API_KEY="sk-bench-000000000000",
                OPENAI_BASE_URL=server.openai_base_url,
            )
            proc = subprocess.Popen(
                chat_command(importtime),
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            err = LineWatcher(proc.stderr)
            LineWatcher(proc.stdout)
            try:
                if not err.wait_for(lambda line: line.startswith("tapebot — model"), 60):
                    raise RuntimeError("tapebot chat printed no banner:\n" + "".join(err.lines[-20:]))
                time.sleep(settle)
                status = proc_status(proc.pid)
            finally:
                assert proc.stdin is not None
                proc.stdin.close()  # EOF: the REPL exits on its own
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return status, err.lines
    finally:
        server.stop()


# ---- (c) tapebot run -----------------------------------------------------------------------------
async def measure_run(
    settle: float, importtime: bool = False
) -> tuple[dict[str, float], dict[str, float], str]:
    """RSS of `tapebot run` idle once connected, then idle again after one message (and its
    reply) on each platform; and the process's stderr."""
    api = FakeBotAPI(token=TELEGRAM_TOKEN)
    await api.serve()
    discord = FakeDiscord(tls=True)
    await discord.start()
    try:
        async with ScriptedLLMServer() as llm:
            llm.default = Reply("ok")
            with tempfile.TemporaryDirectory() as tmp:
                home = Path(tmp) / "home"
                home.mkdir()
                (home / "config.toml").write_text(
                    f"""
[telegram]
api_base_url = "{api.base_url}"
allowed_users = [1001]

[discord]
api_base_url = "{discord.addresses["api_base_url"]}"
gateway_url = "{discord.addresses["gateway_url"]}"
allowed_users = [42]

[scheduler]
enabled = true
""",
                    encoding="utf-8",
                )
                env = clean_env(
                    home,
                    SSL_CERT_FILE=discord.ca_file,  # the fake answers for discord.com
                    OPENAI_API_KEY="sk-bench-000000000000",
                    OPENAI_BASE_URL=llm.openai_base_url,
                    TELEGRAM_BOT_TOKEN=TELEGRAM_TOKEN,
                    DISCORD_BOT_TOKEN=DISCORD_TOKEN,
                )
                # a bot runs on a database at the packaged head (`tapebot db upgrade`, or any earlier
                # start): the migration tooling a brand-new home needs once is not part of idle
                upgrade = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bot.cli", "db", "upgrade", cwd=ROOT, env=env,
                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                )  # fmt: skip
                await upgrade.wait()
                args = [*(["-X", "importtime"] if importtime else []), "-m", "bot.cli", "run"]
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    *args,
                    cwd=ROOT,
                    env=env,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
                stderr = bytearray()

                async def drain() -> None:
                    assert proc.stderr is not None
                    while chunk := await proc.stderr.read(65536):
                        stderr.extend(chunk)

                reader = asyncio.create_task(drain())
                try:
                    await api.wait_for(lambda: api.calls_to("getUpdates"), timeout=60)
                    await discord.wait_for(lambda: discord.identifies, timeout=60)
                    await asyncio.sleep(settle)
                    status = proc_status(proc.pid)
                    api.push_text(1001, "hello", user_id=1001)
                    await api.wait_for(lambda: "ok" in api.texts(1001), timeout=60)
                    await discord.push_dm(channel_id=300, user_id=42, content="hello")
                    await discord.wait_for(
                        lambda: any(m["content"] == "ok" for m in discord.bot_messages(300)), timeout=60
                    )
                    await asyncio.sleep(settle)
                    after = proc_status(proc.pid)
                finally:
                    if proc.returncode is None:
                        proc.send_signal(signal.SIGTERM)
                        try:
                            await asyncio.wait_for(proc.wait(), 30)
                        except TimeoutError:
                            proc.kill()
                            await proc.wait()
                    await reader
                return status, after, stderr.decode(errors="replace")
    finally:
        await discord.close()
        await api.close()


# ---- diagnosis -----------------------------------------------------------------------------------
IMPORT_RE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")
OURS = ("agent", "bot", "config", "memory", "markets", "adapters", "scheduler")
# Replay order: foundations first, so each group's RSS is (mostly) its own; ours come last.
GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("pydantic, pydantic-settings", ("pydantic", "pydantic_core", "pydantic_settings", "typing_inspection",
                                     "annotated_types", "dotenv")),
    ("sqlalchemy, aiosqlite", ("sqlalchemy", "greenlet", "aiosqlite")),
    ("alembic, mako", ("alembic", "mako", "markupsafe")),
    ("httpx (+ its CLI: click, pygments, rich)", ("httpx", "httpcore", "h11", "anyio", "sniffio", "certifi",
                                                 "idna", "click", "pygments", "rich", "markdown_it", "mdurl")),
    ("aiohttp", ("aiohttp", "yarl", "multidict", "attr", "frozenlist", "aiosignal", "propcache",
                 "aiohappyeyeballs")),
    ("numpy", ("numpy",)),
    ("openai SDK (+ httpx2, httpcore2, h2, truststore, jiter)", ("openai", "httpx2", "httpcore2", "h2", "hpack",
                                                               "hyperframe", "truststore", "jiter", "distro")),
    ("anthropic SDK", ("anthropic", "docstring_parser")),
    ("python-telegram-bot", ("telegram",)),
    ("discord.py", ("discord", "nacl")),
    ("apscheduler, tzlocal", ("apscheduler", "tzlocal")),
    ("mcp", ("mcp", "starlette", "sse_starlette", "uvicorn", "jsonschema", "referencing", "rpds")),
    ("matplotlib", ("matplotlib", "PIL", "kiwisolver", "cycler", "fontTools", "pyparsing", "dateutil")),
    ("tapebot: config, agent, memory", ("config", "agent", "memory")),
    ("tapebot: markets", ("markets",)),
    ("tapebot: bot, adapters, scheduler", ("bot", "adapters", "scheduler")),
]  # fmt: skip
REPLAY = """
import importlib, json, re, sys
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
plan = json.load(sys.stdin)
print(json.dumps(["bare interpreter", rss()]), flush=True)
for label, names in plan:
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except BaseException:
                pass
    print(json.dumps([label, rss()]), flush=True)
"""


def parse_importtime(lines: list[str]) -> list[tuple[int, str, int]]:
    """(indent, module, cumulative µs) in completion order."""
    out = []
    for line in lines:
        found = IMPORT_RE.match(line.rstrip("\n"))
        if found:
            out.append((len(found.group(3)), found.group(4), int(found.group(2))))
    return out


def slowest_imports(entries: list[tuple[int, str, int]], limit: int = 10) -> list[tuple[str, float]]:
    """(package, seconds) for the outermost import of each package (ours: per module)."""
    totals: dict[str, float] = {}
    for _indent, name, cumulative in entries:
        parts = name.split(".")
        key = ".".join(parts[:2]) if parts[0] in OURS else parts[0]
        totals[key] = max(totals.get(key, 0.0), cumulative / 1e6)
    return sorted(totals.items(), key=lambda kv: -kv[1])[:limit]


def group_of(name: str) -> str:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top.startswith("_"):
        return "python stdlib (asyncio, ssl, sqlite3, email, …)"
    for label, tops in GROUPS:
        if top in tops:
            return label
    return "tests/bench" if top in ("tests", "bench") else "other third-party"


def replay_rss(modules: list[str]) -> list[tuple[str, float]]:
    """Import `modules` group by group in a fresh interpreter: RSS growth per group (MB)."""
    order = ["python stdlib (asyncio, ssl, sqlite3, email, …)"]
    order += [g for g, _ in GROUPS if not g.startswith("tapebot")] + ["other third-party"]
    order += [g for g, _ in GROUPS if g.startswith("tapebot")]
    plan = [(g, [m for m in modules if group_of(m) == g]) for g in order]
    plan = [(g, ms) for g, ms in plan if ms]
    r = subprocess.run(
        [sys.executable, "-c", REPLAY],
        input=json.dumps(plan),
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    points = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    return [(label, now - before) for (_, before), (label, now) in itertools.pairwise(points)] + (
        [("(total after all imports)", points[-1][1])] if points else []
    )


DIRECTORY_PROBE = """
import re
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024
from markets.data import MarketData
data = MarketData()
before = rss()
data.directory
print(rss() - before)
"""


def explain(label: str, lines: list[str], measured: float | None = None) -> None:
    entries = parse_importtime(lines)
    modules = list(dict.fromkeys(name for _i, name, _c in entries if name not in ("__main__", "bench")))
    print(f"\n  {label}: {len(modules)} modules imported; slowest imports (cumulative):")
    for name, seconds in slowest_imports(entries):
        print(f"    {name:<44} {seconds * 1000:7.0f} ms")
    if measured is None:
        return
    print("  RSS by group, replaying the same imports in a fresh interpreter (foundations first):")
    replay = replay_rss(modules)
    for group, mb in replay:
        print(f"    {group:<56} {mb:6.1f} MB")
    if replay:
        print(f"    {'not imports: data, caches, buffers, threads':<56} {measured - replay[-1][1]:6.1f} MB")
    if "markets.data" in modules:
        r = subprocess.run(
            [sys.executable, "-c", DIRECTORY_PROBE], cwd=ROOT, env=clean_env(), capture_output=True, text=True
        )
        if r.returncode == 0:
            print(f"  of which MarketData().directory (loaded by the first recall or market tool): "
                  f"{float(r.stdout.strip()):.1f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    add_runs_arg(parser, default=7)
    parser.add_argument("--settle", type=float, default=2.0, help="idle seconds before sampling RSS")
    parser.add_argument("--why", action="store_true", help="always print the import diagnosis")
    args = parser.parse_args()
    header("cold start and resident memory (RSS figures are single samples: memory, not timing)")

    bare = timed_median([sys.executable, "-c", "pass"], args.runs)
    help_s = timed_median([sys.executable, "-m", "bot.cli", "--help"], args.runs)
    print(f"(a) tapebot --help cold start: median {help_s:.3f} s of {args.runs} "
          f"(bare interpreter {bare:.3f} s)  target < {HELP_TARGET} s  {mark(help_s < HELP_TARGET)}")  # fmt: skip

    chat, _ = measure_chat(args.settle)
    print(f"(b) tapebot chat idle:  VmRSS {chat['VmRSS']:6.1f} MB  (peak {chat['VmHWM']:6.1f} MB)  "
          f"target < {CHAT_TARGET:.0f} MB  {mark(chat['VmRSS'] < CHAT_TARGET)}")  # fmt: skip

    run, used, _ = asyncio.run(measure_run(args.settle))
    print(f"(c) tapebot run idle (Telegram + Discord connected):  VmRSS {run['VmRSS']:6.1f} MB  "
          f"(peak {run['VmHWM']:6.1f} MB)  target < {RUN_TARGET:.0f} MB  {mark(run['VmRSS'] < RUN_TARGET)}")  # fmt: skip
    print(f"(d) tapebot run idle after one message on each platform:  VmRSS {used['VmRSS']:6.1f} MB  "
          f"(peak {used['VmHWM']:6.1f} MB)  target < {USED_TARGET:.0f} MB  {mark(used['VmRSS'] < USED_TARGET)}")  # fmt: skip

    if args.why or help_s >= HELP_TARGET:
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "bot.cli", "--help"],
            cwd=ROOT,
            env=clean_env(),
            capture_output=True,
            text=True,
        )
        explain("tapebot --help", r.stderr.splitlines())
    if args.why or chat["VmRSS"] >= CHAT_TARGET:
        _, lines = measure_chat(0.2, importtime=True)
        explain("tapebot chat", lines, chat["VmRSS"])
    if args.why or run["VmRSS"] >= RUN_TARGET or used["VmRSS"] >= USED_TARGET:
        _, _, text = asyncio.run(measure_run(0.2, importtime=True))
        explain("tapebot run (after one message each)", text.splitlines(), used["VmRSS"])
    footer()


if __name__ == "__main__":
    main()
