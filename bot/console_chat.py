"""`tapebot chat` (interactive): the App with the console adapter attached to the gateway, so the
terminal has the chats' consent, commands, lanes and task notices.

The terminal is one chat for its user, like a DM (chat key "terminal"): its standing approvals
("Always allow") and `/rules` outlive a session (/new, a new `tapebot chat`), and `tapebot rules`
from the shell sees them. Each `tapebot chat` starts a session of its own ("terminal:<time>"),
or continues the one `--session NAME` names ("terminal:NAME").

What is the terminal's own here: its words around a card (typed answers, not buttons), the card
without the chats' markup, and which chat state tells the console that a turn has settled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from adapters.base import Button, Card, ChatRef, UserRef
from adapters.console import CardPrompt, ConsoleAdapter, ConsoleHooks
from adapters.console_screen import ConsoleLogHandler, Screen
from agent.texts import Text
from bot import cards
from bot.access import TERMINAL_USER
from bot.i18n import pick_language

if TYPE_CHECKING:
    from bot.app import App
    from bot.chats import ChatState
    from bot.gateway import Gateway


TERMINAL_CHAT = ChatRef("terminal", "")  # one chat: its key is "terminal" (adapters/base.py)

#: The terminal's own words around a card (the chats' say "tap a button", "reply to this card").
TERMINAL_STRINGS: dict[str, Text] = {
    "hint": Text(
        en="Type yes or no; a longer message is a new request (the card closes unrun).",
        zh="输入“好”或“不”；较长的消息视为新的请求（卡片关闭，不执行）。",
    ),
    "hint_always": Text(
        en="Type yes, always or no; a longer message is a new request (the card closes unrun).",
        zh="输入“好”、“总是允许”或“不”；较长的消息视为新的请求（卡片关闭，不执行）。",
    ),
    "prompt": Text(
        en="Allow {tool}? [yes] once / [no]: ",
        zh="允许 {tool}？[好] 一次 / [不]：",
    ),
    "prompt_always": Text(
        en="Allow {tool}? [yes] once / [always] / [no]: ",
        zh="允许 {tool}？[好] 一次 / [总是允许] / [不]：",
    ),
    "interrupted": Text(
        en="Ctrl-C: {tool} denied; nothing was run",
        zh="Ctrl-C：已拒绝 {tool}；未执行任何操作",
    ),
    "typed_before": Text(
        en="“{line}” was typed before the card appeared: not used as its answer",
        zh="“{line}”是在卡片出现前输入的：不作为回答",
    ),
    "idle": Text(
        en="(Ctrl-D or /exit quits; Ctrl-C stops a running turn)",
        zh="（Ctrl-D 或 /exit 退出；Ctrl-C 停止正在运行的任务）",
    ),
    "quit_waits": Text(
        en="Quitting once background task {tasks} has finished and been reported…",
        zh="后台任务 {tasks} 完成并汇报后退出…",
    ),
    "thinking": Text(
        en="thinking…",
        zh="思考中…",
    ),
    "you": Text(
        en="you",
        zh="你",
    ),
    "banner": Text(
        en="tapebot — model {model}, session {session}. Ctrl-C stops a running turn, Ctrl-D or /exit quits, /new starts a new session, /rules lists standing approvals, /help lists the commands.",
        zh="tapebot — 模型 {model}，会话 {session}。Ctrl-C 停止正在运行的任务，Ctrl-D 或 /exit 退出，/new 开始新会话，/rules 列出长期允许，/help 列出命令。",
    ),
}


def tt(lang: str, key: str, **kw: Any) -> str:
    text = TERMINAL_STRINGS[key].pick(lang)
    return text.format(**kw) if kw else text


def terminal_language(settings: Any) -> str:
    """`[agent] language`; "auto" follows the shell's locale (LANG=zh_CN.UTF-8 → zh)."""
    import os

    configured = getattr(getattr(settings, "agent", None), "language", "auto") or "auto"
    if configured == "auto":
        configured = os.environ.get("LC_ALL") or os.environ.get("LANG") or "en"
    return pick_language(configured)


class TerminalChat:
    """The bot side of the console: the hooks it is given, over the running App's gateway."""

    def __init__(self, app: App, session: str, lang: str, model: str | None = None):
        self.app, self.session, self.lang, self.model = app, session, lang, model
        self.user = UserRef("terminal", TERMINAL_USER, tt(lang, "you"), language_code=lang)
        self._state: ChatState | None = None
        self.screen: Screen | None = None  # the console's, once built: notes while quitting

    @property
    def gateway(self) -> Gateway:
        """The App's gateway: the console's hooks run only once `App.start` has built it."""
        assert self.app.gateway is not None, "the console runs with the App started"
        return self.app.gateway

    async def state(self) -> ChatState:
        if self._state is None:
            gw = self.gateway
            self._state = await gw.chats.get(TERMINAL_CHAT, self.user, "per_group", self.lang)
        return self._state

    async def on_start(self) -> None:
        """Before the first line, and before the gateway takes up what a stop left: the chat is in
        this run's session, owned by the local user (whom the gateway, built with the console,
        already allows as admin: `bot.access.terminal_access`)."""
        gw = self.gateway
        state = await self.state()
        state.owner = TERMINAL_USER
        state.session_id = self.session
        state.lang = self.lang  # `[agent] language` (or the shell's) each run; /lang for this run
        if self.model:  # `--model` wins over a /model of an earlier run
            state.model = self.model
        await gw.chats.save(state)

    async def settled(self) -> None:
        lane = self.gateway.lanes.of(await self.state())
        while lane.is_running:
            await lane.wait_idle()

    def busy(self) -> bool:
        return self._state is not None and self.gateway.lanes.of(self._state).is_running

    async def on_quit(self) -> None:
        """Background work of this session finishes first; its notices' turns run, then quit."""
        tm = self.app.task_manager
        if tm is None:  # no background tasks (the App is not started): nothing to wait for
            await self.settled()
            return
        said: set[str] = set()
        while True:
            await self.settled()
            state = await self.state()
            pending = [r for r in await tm.list(state.session_id) if not r.terminal]
            if not pending:
                return
            new = [r for r in pending if r.id not in said]
            if new and self.screen is not None:  # say why the terminal does not quit at once
                tasks = ", ".join(f"{r.id} ({r.tool_name})" for r in new)
                self.screen.note(tt(state.lang, "quit_waits", tasks=tasks))
                said.update(r.id for r in new)
            for record in pending:
                await tm.wait(record.id)

    async def present_card(self, card: Card, buttons: Sequence[Sequence[Button]]) -> CardPrompt:
        """The chat card's words without its markup and its last line ("tap a button"), then the
        terminal's hint and prompt. Ctrl-C presses the card's deny button."""
        lang = (await self.state()).lang
        taps = [(b.data, cards.parse_callback(b.data)) for row in buttons for b in row]
        parsed = [(data, tap) for data, tap in taps if isinstance(tap, cards.CardTap)]
        deny = next((data for data, tap in parsed if tap.choice == "deny"), None)
        offers_always = any(tap.choice == "always" for _, tap in parsed)
        approval_id = next((tap.approval_id for _, tap in parsed), "")
        record = await self.app.store.get_approval(approval_id) if self.app.store and approval_id else None
        tool = record.tool if record is not None else "?"
        text = card.text
        if card.footer:
            text = text.removesuffix(f"_{card.footer}_").rstrip()
        always = "_always" if offers_always else ""
        return CardPrompt(
            text=f"\n{cards.plain(text)}\n{tt(lang, 'hint' + always)}",
            prompt=tt(lang, "prompt" + always, tool=tool),
            deny=deny,
            interrupted=tt(lang, "interrupted", tool=tool),
        )


def build_console(app: App, session: str, model: str | None = None) -> ConsoleAdapter:
    lang = terminal_language(app.settings)
    chat = TerminalChat(app, session, lang, model)
    hooks = ConsoleHooks(
        present_card=chat.present_card,
        settled=chat.settled,
        busy=chat.busy,
        on_start=chat.on_start,
        on_quit=chat.on_quit,
        banner=tt(lang, "banner", model=model or app.default_model_id, session=session),
        idle_hint=tt(lang, "idle"),
        typed_before_hint=tt(lang, "typed_before", line="{line}"),
    )
    console = ConsoleAdapter(TERMINAL_CHAT, chat.user, hooks, history=app.settings.home / "chat_history")
    chat.screen = console.screen
    console.screen.spinner_text = tt(lang, "thinking")
    root = logging.getLogger()
    if not root.handlers:  # no log file: warnings go above the prompt, not through it
        root.addHandler(ConsoleLogHandler(console.screen))
    return console


async def run_console(app: App, session: str, model: str | None = None) -> int:
    console = build_console(app, session, model)
    await app.start(adapters=[console], scheduler=False)
    try:
        return await console.run()
    finally:
        for handler in [h for h in logging.getLogger().handlers if isinstance(h, ConsoleLogHandler)]:
            logging.getLogger().removeHandler(handler)
