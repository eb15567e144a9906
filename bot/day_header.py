"""The dynamic part of a turn's system prompt: the day, the chat's platform and language, and the
deployment's stable part (the skills list)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bot.chats import ChatState


class DayHeader:
    """Stable for the day, so the prompt-cache prefix survives from turn to turn (and is made once
    a day per platform and language, not per turn)."""

    def __init__(self, system_dynamic: str = ""):
        self.system_dynamic = system_dynamic
        self._texts: dict[tuple[int, str, str, str], str] = {}

    def for_chat(self, state: ChatState) -> str:
        key = (int(time.time() // 86_400), state.chat.platform, state.lang, self.system_dynamic)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) > 64:  # yesterday's
                self._texts.clear()
            today = datetime.fromtimestamp(key[0] * 86_400, UTC).strftime("%Y-%m-%d")
            lang = "Chinese" if state.lang == "zh" else "English"
            head = f"Today: {today} (UTC). Chat platform: {state.chat.platform}. Preferred language: {lang}."
            text = self._texts[key] = f"{head}\n{self.system_dynamic}" if self.system_dynamic else head
        return text
