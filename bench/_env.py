"""What every bench prints so a figure can be judged and reproduced: the interpreter, the CPU model
and core count, the load average (before and after), and medians of at least `MIN_RUNS` runs.

A figure taken while the machine is busy (load average above the core count) is marked BUSY: it
says something about relative cost (before/after in the same conditions), not about the code's
speed on a quiet machine.

The load average does not show a host that is itself shared: on this virtual 2-core machine the
same code's CPU time per message has measured 0.8 ms in one quarter of an hour and 1.3 ms in the
next, at the same load. So header and footer also print the host's speed at that moment: the CPU
time of a fixed piece of interpreter work (`host_speed`, median of 7, ~35 ms in all). A figure
taken when it is high is slow in proportion; compare figures only at a similar host speed, or
interleaved. It changes within seconds, so it is a hint, not a correction factor.

    from bench._env import header, footer, add_runs_arg, median_of
    header("compaction")                 # at the start of main()
    ms, samples = median_of(fn, runs)    # seconds; fn is called `runs` times
    footer()                             # load average again at the end
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

MIN_RUNS = 5


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def load_line() -> str:
    one, five, fifteen = load()
    busy = " — BUSY machine: compare only with figures from the same run" if one > cores() else ""
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {cores()} cores{busy}"


def _fixed_work() -> int:
    """Dictionary, string and integer work of a fixed size: what an interpreter mostly does."""
    table: dict[int, str] = {}
    for i in range(40_000):
        table[i & 1023] = str(i)
    return len(table)


def host_speed(samples: int = 7) -> float:
    """Milliseconds of this thread's CPU time for `_fixed_work` (median of `samples`): 4.7–4.8 ms
    on this 2-core Xeon when its host is quiet; more (up to 8 ms seen) when the host is busy,
    whatever the load average says."""
    times = []
    for _ in range(samples):
        t = time.thread_time()
        _fixed_work()
        times.append(time.thread_time() - t)
    return statistics.median(times) * 1000


def speed_line() -> str:
    return f"host speed: fixed interpreter work {host_speed():.1f} ms of CPU (lower is faster)"


def machine_lines() -> list[str]:
    impl = platform.python_implementation()
    return [
        f"python {impl} {platform.python_version()} ({sys.executable})",
        f"cpu {cpu_model()} × {cores()} cores ({platform.system()} {platform.release()})",
        load_line(),
        speed_line(),
    ]


def header(title: str) -> None:
    print(f"== {title}")
    for line in machine_lines():
        print(f"   {line}")


def footer() -> None:
    print(f"   at the end: {load_line()}; {speed_line()}")


def add_runs_arg(parser: argparse.ArgumentParser, default: int = MIN_RUNS) -> None:
    parser.add_argument(
        "--runs", type=_runs, default=default, help=f"repetitions; the median is printed (≥ {MIN_RUNS})"
    )


def _runs(text: str) -> int:
    n = int(text)
    if n < MIN_RUNS:
        raise argparse.ArgumentTypeError(f"at least {MIN_RUNS} runs: a median of fewer says little")
    return n


def median_of(fn: Callable[[], object], runs: int = MIN_RUNS) -> tuple[float, list[float]]:
    """Median wall time of `runs` calls of `fn`, in seconds, and the samples."""
    samples = []
    for _ in range(max(runs, 1)):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples), samples


async def amedian_of(fn: Callable[[], Awaitable[object]], runs: int = MIN_RUNS) -> tuple[float, list[float]]:
    samples = []
    for _ in range(max(runs, 1)):
        t = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples), samples


def spread(samples: list[float], scale: float = 1.0, unit: str = "") -> str:
    """`min–max of n` for printing next to a median."""
    return f"(min {min(samples) * scale:.3g}{unit}, max {max(samples) * scale:.3g}{unit}, n={len(samples)})"
