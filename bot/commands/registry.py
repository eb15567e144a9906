"""The command set: each command's definition (`CommandSpec`) with its handler. The gateway asks it
which commands are admin-only in groups and which leave a waiting card open; the menus and /help
are made from the same definitions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass

from adapters.commandspec import CommandSpec
from bot.commands.context import CommandContext

Handler = Callable[[CommandContext], Awaitable[None]]

#: /help's headings, in this order
GROUPS = ("session", "approvals", "background", "memory", "skills")


@dataclass(frozen=True, slots=True)
class Command:
    spec: CommandSpec
    handler: Handler

    @property
    def name(self) -> str:
        return self.spec.name


class CommandRegistry:
    def __init__(self, commands: Iterable[Command] = ()):
        self._commands: dict[str, Command] = {}
        for command in commands:
            self.add(command)

    def add(self, command: Command) -> None:
        if command.spec.group not in GROUPS:
            raise ValueError(f"/{command.name}: unknown group {command.spec.group!r}")
        self._commands[command.name] = command

    def setdefault(self, command: Command) -> None:
        """Add unless a command of that name exists (a skill never shadows a built-in)."""
        if command.name not in self._commands:
            self.add(command)

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands.values())

    def specs(self) -> list[CommandSpec]:
        """In /help's group order, each group in the order its commands were added."""
        order = {g: i for i, g in enumerate(GROUPS)}
        return [c.spec for c in sorted(self._commands.values(), key=lambda c: order[c.spec.group])]

    def admin_only_in_groups(self, name: str) -> bool:
        command = self._commands.get(name)
        return command is not None and command.spec.admin_only_in_groups

    def keeps_waiting(self, name: str) -> bool:
        command = self._commands.get(name)
        return command is not None and command.spec.keeps_waiting
