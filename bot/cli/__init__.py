"""The `tapebot` command line.

Kept fast to start (`tapebot --help` imports only argparse and the config error types): every
subcommand imports what it needs when it runs. Errors never print a traceback unless `--debug`:
a `ConfigError` is one line and exit status 2; anything else is one line, a hint, and status 1.

Subcommands that parse their own arguments are listed in `EXTENSIONS` (name -> help text and a
runner); a runner is called as `fn(argv, ctx) -> int` with the arguments after the subcommand name
and a `CliContext`, and imports its module only when it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bot.cli import completion
from bot.cli.invocation import CliContext
from config.errors import ConfigError, TapebotError
from config.filemodes import private_umask

PROG = "tapebot"

Runner = Callable[[list[str], CliContext], int]


def _memory(argv: list[str], ctx: CliContext) -> int:
    from memory.cli import memory_cli

    return memory_cli(argv, ctx.settings(require_model=False), out=ctx.stdout)


def _skills(argv: list[str], ctx: CliContext) -> int:
    from agent.skills import skills_cli

    return skills_cli(argv, ctx.settings(require_model=False).skills_dir, ctx.stdout)


def _rules(argv: list[str], ctx: CliContext) -> int:
    from bot import approval_rules

    return approval_rules.main(argv, ctx)


def _mcp(argv: list[str], ctx: CliContext) -> int:
    from bot.cli import mcp

    return mcp.cli_main(argv, ctx)


def _data(argv: list[str], ctx: CliContext) -> int:
    from bot.cli import market_data

    return market_data.main(argv, ctx)


def _link(argv: list[str], ctx: CliContext) -> int:
    from bot.cli import link

    return link.main(argv, ctx)


# name -> (one-line help, runner). A runner imports its module only when that subcommand runs.
EXTENSIONS: dict[str, tuple[str, Runner]] = {
    "memory": ("inspect, search and edit long-term memories", _memory),
    "skills": ("list and check skills (`tapebot skills check`)", _skills),
    "rules": ("list and revoke standing approvals (`tapebot rules list|revoke <id>|all`)", _rules),
    "mcp": ("serve tapebot's investing tools over MCP (stdio); `tapebot mcp tools` lists them", _mcp),
    "link": (
        "link the terminal with your Telegram/Discord chats: one book, memory and alerts (`tapebot link [CODE]`)",
        _link,
    ),
    "data": ("market data maintenance: `tapebot data update-calendar`", _data),
}


def version() -> str:
    """The installed distribution's version (pyproject.toml), without importing anything heavy."""
    from importlib import metadata

    try:
        return metadata.version("tapebot")
    except metadata.PackageNotFoundError:
        return "0+unknown (not installed)"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked: importlib.metadata and the distribution scan cost
    ~40 ms that every other command would pay."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kw: Any) -> None:
        print(f"{PROG} {version()}", file=sys.stdout)  # stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="tapebot — a self-hosted AI investing assistant for Telegram, Discord and the terminal.",
        epilog="State lives in $TAPEBOT_HOME (default ~/.tapebot). Start with `tapebot init`, then `tapebot chat`.",
    )
    home = parser.add_argument(
        "--home", type=Path, help="state folder (default: $TAPEBOT_HOME or ~/.tapebot)"
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    log_file = parser.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help="also write logs to PATH, rotated (overrides [log] file)",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("init", help="write a commented starter config to $TAPEBOT_HOME/config.toml")
    p.add_argument("--force", action="store_true", help="overwrite an existing config.toml")

    p = sub.add_parser("config", help="validate and show the effective configuration")
    config_sub = p.add_subparsers(dest="config_command", metavar="ACTION")
    config_sub.add_parser("check", help="validate and print the effective config (secrets masked)")

    p = sub.add_parser("db", help="database maintenance")
    db_sub = p.add_subparsers(dest="db_command", metavar="ACTION")
    db_sub.add_parser("upgrade", help="apply database migrations (also done automatically at start)")
    p = db_sub.add_parser("backup", help="copy the SQLite database to a timestamped file (0600)")
    to = p.add_argument(
        "--to", type=Path, metavar="DIR", help="folder for the copy (default: $TAPEBOT_HOME/backups)"
    )

    p = sub.add_parser("usage", help="token and cost totals per model")
    p.add_argument("--days", type=_positive_float, default=30, help="look back this many days (default 30)")

    p = sub.add_parser("chat", help="talk to the agent in the terminal")
    p.add_argument("-m", "--message", metavar="TEXT", help="run one turn, print the answer and exit")
    p.add_argument("--session", metavar="NAME", help="continue a named session across invocations")
    p.add_argument("--model", metavar="ID", help="use this [[models]] id instead of agent.model")

    sub.add_parser("run", help="run the chat bot (Telegram/Discord) and the scheduler")
    sub.add_parser("health", help="exit 0 when `tapebot run` is running here (a container's HEALTHCHECK)")
    sub.add_parser(
        "doctor", help="check model, Telegram, Discord, database, calendar, data, file modes and sandbox"
    )
    p = sub.add_parser("completion", help="print a shell completion script: tapebot completion bash|zsh")
    p.add_argument("shell", choices=("bash", "zsh"))

    for name, (help_text, _target) in EXTENSIONS.items():
        p = sub.add_parser(name, help=help_text, add_help=False)
        rest = p.add_argument("rest", nargs=argparse.REMAINDER)
        rest.complete = completion.extension_words(name)  # type: ignore[attr-defined]  # read by shtab
    for path in (home, log_file, to):
        path.complete = completion.PATH  # type: ignore[attr-defined]  # read by shtab
    return parser


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _split_extension(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """Extensions parse their own arguments, options included (`tapebot memory --scope X list`):
    split argv after the extension's name, before argparse sees the rest."""
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in ("--home", "--log-file"):
            i += 2
            continue
        if token.startswith("-"):
            i += 1
            continue
        if token in EXTENSIONS:
            return argv[: i + 1], argv[i + 1 :]
        return argv, None
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    head, rest = _split_extension(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(head)
    if rest is not None:
        args.rest = rest
    ctx = CliContext(home=args.home, debug=args.debug, log_file=args.log_file)
    if not args.command:
        parser.print_help(ctx.stdout)
        return 0
    # One configuration truth: every command sees the same environment — the real one, then
    # ./.env, then $TAPEBOT_HOME/.env — so a key in .env works for `chat` as for `run`.
    ctx.read_env_files()
    # Whatever a command writes under TAPEBOT_HOME is private, whatever the caller's umask.
    old_umask = private_umask()
    try:
        return _dispatch(args, ctx, parser)
    except ConfigError as exc:
        if ctx.debug:
            raise
        print(f"{PROG}: {exc}", file=ctx.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=ctx.stderr)
        return 130
    except TapebotError as exc:
        if ctx.debug:
            raise
        print(f"{PROG}: {_one_line(exc)}", file=ctx.stderr)
        return 1
    except Exception as exc:
        if ctx.debug:
            raise
        print(
            f"{PROG}: unexpected error: {type(exc).__name__}: {_one_line(exc)} (rerun with --debug for details)",
            file=ctx.stderr,
        )
        return 1
    finally:
        os.umask(old_umask)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _dispatch(args: argparse.Namespace, ctx: CliContext, parser: argparse.ArgumentParser) -> int:
    command = args.command
    if command == "init":
        return cmd_init(ctx, force=args.force)
    if command == "config":
        if args.config_command != "check":
            parser.parse_args(["config", "--help"])
        return cmd_config_check(ctx)
    if command == "db":
        if args.db_command == "backup":
            return cmd_db_backup(ctx, dest=args.to)
        if args.db_command != "upgrade":
            parser.parse_args(["db", "--help"])
        return cmd_db_upgrade(ctx)
    if command == "doctor":
        from bot.cli import doctor as cli_doctor

        return cli_doctor.main(ctx)
    if command == "health":
        from bot.cli import health as cli_health

        return cli_health.main(ctx)
    if command == "completion":
        print(completion.script(args.shell, parser), file=ctx.stdout, end="")
        return 0
    if command == "usage":
        return cmd_usage(ctx, days=args.days)
    if command == "chat":
        settings = ctx.settings(model=args.model)
        if settings.log_file is not None:  # the terminal is for the conversation: file only
            from bot.logs import configure_logging

            configure_logging(
                settings.log_level,
                file=settings.log_file,
                max_bytes=settings.log.max_bytes,
                backups=settings.log.backups,
                console=False,
            )
        from bot import terminal

        return _exit_code(asyncio.run(terminal.run_chat(args, settings)))
    if command == "run":
        settings = ctx.settings(require_platform=True)
        from bot import run

        return _exit_code(asyncio.run(run.run_bot(settings)))
    if command in EXTENSIONS:
        return run_extension(command, list(args.rest), ctx)
    parser.error(f"unknown command {command!r}")
    return 2  # unreachable: parser.error exits


def _exit_code(result: Any) -> int:
    return result if isinstance(result, int) else 0


def run_extension(name: str, argv: list[str], ctx: CliContext) -> int:
    _help, runner = EXTENSIONS[name]
    try:
        return _exit_code(runner(argv, ctx))
    except ModuleNotFoundError as exc:
        # tapebot's own module left out of this build; a missing third-party library is its own error
        if not (exc.name or "").startswith("bot."):
            raise
        print(f"{PROG}: '{name}' is not available in this build", file=ctx.stderr)
        return 1


# ---- built-in commands -------------------------------------------------------------------------
def cmd_init(ctx: CliContext, *, force: bool = False) -> int:
    from config.starter import write_starter

    home = ctx.resolve_home()
    path = write_starter(home, force=force)
    print(f"wrote {path}", file=ctx.stdout)
    print(
        "next: set ANTHROPIC_API_KEY (or OPENAI_API_KEY), or edit [[models]] there; then `tapebot chat`",
        file=ctx.stdout,
    )
    return 0


def cmd_config_check(ctx: CliContext) -> int:
    import tomli_w

    from agent.tools import sandbox
    from bot.parts import local_policy
    from config.filemodes import loose_modes
    from config.loader import mask

    settings = ctx.settings()
    shown = _drop_none(mask(settings))
    source = (
        str(settings.config_path) if settings.config_path.exists() else "no config file (environment only)"
    )
    print(f"# effective configuration — {source}", file=ctx.stdout)
    print(tomli_w.dumps(shown).rstrip(), file=ctx.stdout)
    chain = " -> ".join(m.id for m in settings.model_chain())
    print(f"# OK: models {chain}; database {shown['database_url']}", file=ctx.stdout)
    print(f"# exec_command: {sandbox.describe(local_policy(settings))}", file=ctx.stdout)
    for loose in loose_modes(settings.home):  # warn, the exit code stays 0
        print(f"{PROG}: warning: {loose}", file=ctx.stderr)
    from markets.calendar import TradingCalendar, exchange_today

    try:
        warn = TradingCalendar.sse(settings.home / "data").warning(exchange_today(ctx.now()))
    except ValueError as exc:  # a broken calendar file dropped into the data folder
        warn = str(exc)
    if warn:
        print(f"# WARNING: {warn}", file=ctx.stdout)
    return 0


def _drop_none(value: Any) -> Any:
    """TOML has no null: leave unset keys out of the printout."""
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


def cmd_db_upgrade(ctx: CliContext) -> int:
    from bot.cli import database as cli_db

    return int(cli_db.upgrade(ctx))


def cmd_db_backup(ctx: CliContext, *, dest: Path | None = None) -> int:
    from bot.cli import database as cli_db

    return int(cli_db.backup(ctx, dest=dest))


def cmd_usage(ctx: CliContext, *, days: float = 30) -> int:
    from bot.cli import database as cli_db

    return int(cli_db.usage(ctx, days=days))
