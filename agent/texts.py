"""The one format of the bot's user-facing words: a catalogue maps a key to a `Text`, which holds
that sentence in every language the bot speaks (English and Chinese). A missing translation is a
type error, not a silent fallback; `tests/bot/test_i18n_complete.py` checks that the two sides of
every `Text` take the same placeholders."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

LANGUAGES = ("en", "zh")


@dataclass(frozen=True, slots=True)
class Text:
    en: str
    zh: str

    def pick(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


Catalogue: TypeAlias = Mapping[str, Text]


def pick_language(client_language: str | None) -> str:
    """ "zh" for a Chinese client language (zh, zh-CN, zh-Hans…), else "en"."""
    return "zh" if (client_language or "").lower().startswith("zh") else "en"


def say(catalogue: Catalogue, lang: str, key: str, **kw: Any) -> str:
    """The text for `key` in `lang` (English for a language we do not speak), formatted with `kw`.
    An unknown key reads as itself."""
    text = catalogue.get(key)
    if text is None:
        return key
    out = text.pick(lang)
    return out.format(**kw) if kw else out


def words(catalogue: Catalogue, lang: str) -> dict[str, str]:
    """The catalogue's texts in `lang`, by key: for code that picks several of them."""
    return {key: text.pick(lang) for key, text in catalogue.items()}
