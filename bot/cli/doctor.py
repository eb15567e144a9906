"""`tapebot doctor` on the command line: load the configuration the way `tapebot run` would (the
same .env files), run every check, print one line each; exit 1 when any check failed."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import TYPE_CHECKING

from config.errors import ConfigError

if TYPE_CHECKING:
    from bot.cli.invocation import CliContext


def main(ctx: CliContext, *, today: date | None = None) -> int:
    from bot.doctor import Check, exit_code, render, run_checks

    try:
        settings = ctx.settings(require_model=False)
    except ConfigError as exc:
        # str(exc) is one line naming the file, the key and the fix
        checks = [Check("config", "fail", str(exc), "then `tapebot config check`")]
        print(render(checks), file=ctx.stdout)
        return 1
    source = settings.config_path if settings.config_path.exists() else "environment only (no config.toml)"
    checks = [Check("config", "ok", f"{source}")]
    checks += asyncio.run(run_checks(settings, today=today))
    print(render(checks), file=ctx.stdout)
    return exit_code(checks)
