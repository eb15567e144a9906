"""Every user-facing string table is complete in English and Chinese.

One format: a catalogue is a module-level `{key: Text(en=…, zh=…)}` (agent/texts.py), so a key
cannot lack a language. Tables are found, not listed: every module-level catalogue in the
project's packages is checked without touching this file; so is every `Words` of the command
definitions. A table in another shape (`{"en": {…}, "zh": {…}}`, `{key: {"en": …, "zh": …}}`, a
pair `X_EN` / `X_ZH`) fails `test_every_table_is_a_catalogue_of_texts`.
For each table: both languages have the same keys; the `{placeholders}` agree; a Chinese text
contains Chinese (or nothing that reads as words); no Chinese text carries an English sentence
(three English words in a row outside `code`, /commands, paths and identifiers); no English text
carries Chinese. Exceptions are listed below with the reason.
"""

from __future__ import annotations

import ast
import importlib
import re
import string
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adapters", "agent", "bot", "config", "markets", "memory", "scheduler")
LANGS = ("en", "zh")

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# at least three English words in a row, separated by spaces or commas only
ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?:[ ,]+[A-Za-z]+){2,}")
CODE = re.compile(r"`[^`]*`")
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# tokens that are names, not prose: /commands and paths, ids, config keys, numbers, <args>
NOT_PROSE = re.compile(r"\S*[/_$=<>#@.\d]\S*")

# (table, key, language) whose text is right without the usual property, and why
ALLOWED = {
    ("commands", "lang.description", "en"): "names the Chinese choice in Chinese: English / 中文",
    (
        "commands",
        "lang.options[0] language.choices[1] zh.label",
        "en",
    ): "the Chinese choice, named in Chinese",
}
# tables every run must find (a discovery that finds nothing must not pass silently)
EXPECTED_TABLES = {
    "bot.i18n.STRINGS",
    "bot.i18n_consent.CONSENT_STRINGS",
    "bot.i18n_commands.COMMAND_STRINGS",
    "bot.commands.background._SKILL",
    "commands",  # the command definitions' Words
    "bot.i18n_tasks.TASK_STRINGS",
    "scheduler.i18n.SCHEDULE_STRINGS",
    "memory.cli.MEMORY_STRINGS",
    "markets.calendar.CALENDAR_STRINGS",
    "agent.background_tools.TASK_WORDS",
    "agent.mcp_client.MCP_WORDS",
    "agent.consent.SCOPE_WORDS",
    "adapters.notices.DEFAULT_NOTICES",
    "bot.i18n_alerts.ALERT_STRINGS",
    "bot.console_chat.TERMINAL_STRINGS",
    "bot.toolcatalog._EFFECT",
    "bot.toolcatalog._FLAGS",
    "bot.tool_labels.LABELS",
}


def _literal_keys(node: ast.AST) -> set[str]:
    if not isinstance(node, ast.Dict):
        return set()
    return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def _is_table(node: ast.AST) -> bool:
    keys = _literal_keys(node)
    if keys & set(LANGS):  # {"en": {...}, "zh": {...}}
        return any(isinstance(v, ast.Dict | ast.Name | ast.Call) for v in node.values)  # type: ignore[attr-defined]
    values = getattr(node, "values", [])
    return bool(values) and all(_literal_keys(v) >= {"en"} for v in values)  # {key: {"en": …, "zh": …}}


def _module_level_names(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name):
            out.append((target.id, value))
    return out


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out.append((module, ast.parse(path.read_text("utf-8"))))
    return out


def discover_tables() -> dict[str, dict[str, dict[str, str]]]:
    """name → {lang: {key: text}}, for every module-level catalogue in the project's packages."""
    from agent.texts import Text

    found: dict[str, dict[str, dict[str, str]]] = {}
    for module, tree in _modules():
        for name, value in _module_level_names(tree):
            if not (isinstance(value, ast.Dict) and value.values and isinstance(value.values[0], ast.Call)):
                continue
            table = getattr(importlib.import_module(module), name)
            if isinstance(table, dict) and table and all(isinstance(v, Text) for v in table.values()):
                found[f"{module}.{name}"] = {
                    lang: {k: getattr(v, lang) for k, v in table.items()} for lang in LANGS
                }
    found["commands"] = _command_words()
    return found


def other_shaped_tables() -> list[str]:
    """Module-level text tables in any shape but a catalogue of `Text`s."""
    out = []
    for module, tree in _modules():
        out += sorted(_split_tables(module, tree))
        for name, value in _module_level_names(tree):
            if _is_table(value) and _by_language(getattr(importlib.import_module(module), name)) is not None:
                out.append(f"{module}.{name}")
    return out


def _split_tables(module: str, tree: ast.Module) -> dict[str, dict[str, dict[str, str]]]:
    """`X_EN = {key: text}` with `X_ZH = {key: text}` beside it: one table "module.X"."""
    names = {
        t.id
        for stmt in tree.body
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Dict)
        for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        if isinstance(t, ast.Name)
    }
    out = {}
    for name in names:
        if name.endswith("_EN") and name[:-3] + "_ZH" in names:
            mod = importlib.import_module(module)
            en, zh = getattr(mod, name), getattr(mod, name[:-3] + "_ZH")
            if all(isinstance(v, str) for v in [*en.values(), *zh.values()]):
                out[f"{module}.{name[:-3]}"] = {"en": dict(en), "zh": dict(zh)}
    return out


def _command_words() -> dict[str, dict[str, str]]:
    """Every `Words` of the built-in command definitions (descriptions, options, subcommands,
    choices), keyed by where it sits: "/brief now", "/lang language"."""
    from adapters.commandspec import Words
    from bot.commands import builtin_commands

    out: dict[str, dict[str, str]] = {"en": {}, "zh": {}}

    def add(where: str, node: object) -> None:
        if isinstance(node, Words):
            out["en"][where], out["zh"][where] = node.en, node.zh
        elif isinstance(node, tuple | list):
            for i, item in enumerate(node):
                add(f"{where}[{i}]", item)
        elif hasattr(node, "__dataclass_fields__"):
            label = getattr(node, "name", "") or getattr(node, "value", "")
            for field in node.__dataclass_fields__:
                add(f"{where} {label}.{field}".strip(), getattr(node, field))

    for command in builtin_commands():
        add("", command.spec)
    return out


def _by_language(table: object) -> dict[str, dict[str, str]] | None:
    """The table as {lang: {key: text}}; None when its texts are not strings (word sets, tuples)."""
    if not isinstance(table, dict) or not table:
        return None
    if set(table) & set(LANGS):
        if not all(isinstance(words, dict) for words in table.values()):
            return None
        out = {lang: dict(words) for lang, words in table.items()}
    else:
        out = {}
        for key, per_lang in table.items():
            for lang, text in per_lang.items():
                out.setdefault(lang, {})[key] = text
    if not all(isinstance(text, str) for words in out.values() for text in words.values()):
        return None
    return out


TABLES = discover_tables()


def placeholders(text: str) -> set[str]:
    names = set()
    for _literal, field, _spec, _conversion in string.Formatter().parse(text):
        if field is not None:
            names.add(re.split(r"[.\[]", field)[0])
    return names


def prose(text: str) -> str:
    """What is left to read as language once code, placeholders and names are taken out."""
    text = PLACEHOLDER.sub(" ", CODE.sub(" ", text))
    return NOT_PROSE.sub(" ", text)


def texts() -> list[tuple[str, str, str, str]]:
    return [
        (name, key, lang, text)
        for name, table in TABLES.items()
        for lang, words in table.items()
        for key, text in words.items()
    ]


def test_every_table_is_a_catalogue_of_texts():
    assert other_shaped_tables() == []


def test_the_known_tables_are_discovered():
    assert set(TABLES) >= EXPECTED_TABLES, sorted(EXPECTED_TABLES - set(TABLES))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_key_is_in_both_languages(name):
    table = TABLES[name]
    assert set(table) >= set(LANGS), f"{name} has languages {sorted(table)}"
    en, zh = set(table["en"]), set(table["zh"])
    assert not en - zh, f"{name}: no Chinese for {sorted(en - zh)}"
    assert not zh - en, f"{name}: no English for {sorted(zh - en)}"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_placeholders_agree_between_languages(name):
    table = TABLES[name]
    wrong = {
        key: (placeholders(table["en"][key]), placeholders(text))
        for key, text in table.get("zh", {}).items()
        if key in table["en"] and placeholders(table["en"][key]) != placeholders(text)
    }
    assert not wrong, f"{name}: placeholders differ (en, zh): {wrong}"


def test_chinese_texts_are_chinese():
    bad = [
        (name, key, text)
        for name, key, lang, text in texts()
        if lang == "zh"
        and not CJK.search(text)
        and re.search(r"[A-Za-z]", prose(text))
        and (name, key, lang) not in ALLOWED
    ]
    assert not bad, f"Chinese texts without Chinese: {bad}"


def test_no_english_sentence_in_a_chinese_text():
    bad = [
        (name, key, run.group())
        for name, key, lang, text in texts()
        if lang == "zh" and (name, key, lang) not in ALLOWED and (run := ENGLISH_RUN.search(prose(text)))
    ]
    assert not bad, f"English inside Chinese texts: {bad}"


def test_no_chinese_in_an_english_text():
    bad = [
        (name, key, text)
        for name, key, lang, text in texts()
        if lang == "en" and CJK.search(text) and (name, key, lang) not in ALLOWED
    ]
    assert not bad, f"Chinese inside English texts: {bad}"


def test_every_exception_still_exists():
    """An exception for a text that is gone or reworded would hide the next one's mistake."""
    stale = [k for k in ALLOWED if k[1] not in TABLES.get(k[0], {}).get(k[2], {})]
    assert not stale, stale


# ---- the checks themselves --------------------------------------------------------------------
def test_the_heuristics_catch_what_they_are_for():
    assert ENGLISH_RUN.search(prose("运行中：no new tasks here"))
    assert not ENGLISH_RUN.search(prose("用法：/rules revoke <id> · /rules revoke all"))
    assert not ENGLISH_RUN.search(prose("运行 `tapebot data update-calendar now`，或 {name} is here"))
    assert not ENGLISH_RUN.search(prose("如 Asia/Shanghai、Europe/London 或 America/New_York"))
    assert prose("{side} {quantity} × {name}").strip(" ×") == ""
    assert placeholders("{a} {b!r} {c:02d} {d.e}") == {"a", "b", "c", "d"}
    assert _by_language({"yes": {"en": "yes", "zh": "是"}}) == {"en": {"yes": "yes"}, "zh": {"yes": "是"}}
    assert _by_language({"en": {"ok", "yes"}, "zh": {"好"}}) is None  # word sets, not texts
