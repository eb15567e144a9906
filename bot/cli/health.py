"""`tapebot health`: exit 0 when the `tapebot run` of this TAPEBOT_HOME is running and its event
loop turns (its heartbeat is fresh), else 1 with one line saying why. Made for a container's
HEALTHCHECK: it reads one small file and loads no configuration, so it stays cheap every interval."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.cli.invocation import CliContext


def main(ctx: CliContext) -> int:
    from bot.heartbeat import heartbeat_path, judge
    from config.loader import resolve_home

    ctx.read_env_files()  # ./.env may name TAPEBOT_HOME, as for `tapebot run`
    path = heartbeat_path(resolve_home(ctx.home, ctx.environ))
    verdict = judge(path, ctx.now().timestamp())
    print(f"tapebot health: {verdict.line}", file=ctx.stdout if verdict.healthy else ctx.stderr)
    return 0 if verdict.healthy else 1
