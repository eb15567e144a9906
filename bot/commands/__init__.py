"""Chat commands, one module per family, each a `CommandSpec` (adapters/commandspec.py) with a
handler written against `CommandContext` (context.py). The same definitions make the Telegram
menu, Discord's slash commands, the terminal's commands and /help; the gateway builds a context
for each command in one place (binding.py)."""

from __future__ import annotations

from bot.commands import approvals, background, link, market_alerts, memory, session
from bot.commands.registry import GROUPS, Command, CommandRegistry, Handler


def builtin_commands() -> list[Command]:
    return [
        *session.COMMANDS,
        *approvals.COMMANDS,
        *background.COMMANDS,
        *market_alerts.COMMANDS,
        *memory.COMMANDS,
        *link.COMMANDS,
    ]


__all__ = ["GROUPS", "Command", "CommandRegistry", "Handler", "builtin_commands"]
