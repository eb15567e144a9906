"""Skills: one-word preset workflows — `/screen`, `/checkup`, `/report`, `/strategy`,
`/backtest` — plus the user's own from `$TAPEBOT_HOME/skills/*.md`.

A skill is a Markdown file with front matter:

    ---
    name: dcf
    description: DCF valuation of one stock
    arguments: stock code or name
    ---
    Run a DCF valuation of {arguments}. ...

Only names and descriptions go into the prompt (`skills_prompt`, placed in `system_dynamic` after
the static system prompt so the cached prefix stays stable). The body is loaded lazily: by the
`execute_skill` tool when the model decides a request matches, or inlined by `skill_turn_text`
when the user types the command. `{arguments}` (or the older `{user_input}`) in the body is
replaced by what the user typed after the command. A user skill with a built-in's name overrides
it; invalid files are reported (`check_skills`, `tapebot skills check`), never crashed on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from agent.errors import ToolFailed
from agent.tools.registry import ToolContext, Toolset

# Telegram bot commands allow 1-32 characters of lowercase letters, digits and underscores; Discord
# slash commands accept the same. A skill is a command, so its name must fit both.
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_DESCRIPTION = 100  # Discord's limit for a slash-command description
MAX_BODY_CHARS = 20_000
KNOWN_KEYS = frozenset({"name", "description", "arguments"})
BUILTIN_NAMES = ("screen", "checkup", "report", "strategy", "backtest", "daily_brief")
# Chat commands a skill may not shadow (bot/commands.py and the planned ones).
RESERVED_COMMANDS = frozenset(
    {
        "start",
        "help",
        "new",
        "clear",
        "cancel",
        "model",
        "lang",
        "status",
        "approve",
        "deny",
        "memory",
        "compact",
        "brief",
        "tasks",
        "skills",
        "settings",
    }
)
PLACEHOLDERS = ("{arguments}", "{user_input}")


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    body: str
    arguments: str = ""  # a hint for what may follow the command ("stock code or name")
    source: Path | None = None  # None for built-ins
    builtin: bool = False
    overrides_builtin: bool = False

    def render(self, arguments: str = "") -> str:
        """The instructions with the user's arguments filled in."""
        args = arguments.strip()
        body = self.body
        if any(p in body for p in PLACEHOLDERS):
            filled = args or "(no arguments given: use the user's current context or ask)"
            for p in PLACEHOLDERS:
                body = body.replace(p, filled)
            return body
        return body + (f"\n\nArguments: {args}" if args else "")


class SkillError(ValueError):
    """A skill file that cannot be used; the message says why."""


def parse_skill(text: str, *, fallback_name: str = "", source: Path | None = None) -> tuple[Skill, list[str]]:
    """Parse one skill file. Returns the skill and non-fatal warnings; raises SkillError when the
    file cannot be used. Without front matter the file name is the name and the first line the
    description."""
    warnings: list[str] = []
    meta: dict[str, str] = {}
    body = text.replace("\r\n", "\n").lstrip("\ufeff")
    lines = body.split("\n")
    if lines and lines[0].strip() == "---":
        close = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if close is None:
            raise SkillError("front matter starts with --- but never ends (add a closing --- line)")
        for lineno, line in enumerate(lines[1:close], start=2):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.partition(":")
            if not sep or not key.strip() or line[0] in " \t-":
                raise SkillError(f"front matter line {lineno} is not `key: value`: {line.strip()!r}")
            key = key.strip().lower()
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            if key not in KNOWN_KEYS:
                warnings.append(f"unknown front-matter key {key!r} (ignored)")
                continue
            meta[key] = value
        body = "\n".join(lines[close + 1 :])
    body = body.strip()
    name = meta.get("name") or fallback_name
    if not name:
        raise SkillError("no name: add `name:` to the front matter")
    if not NAME_RE.match(name):
        raise SkillError(
            f"invalid name {name!r}: use 1-32 lowercase letters, digits or underscores, starting with "
            "a letter (it becomes a chat command)"
        )
    if not body:
        raise SkillError("the skill has no instructions after the front matter")
    if len(body) > MAX_BODY_CHARS:
        raise SkillError(f"the instructions are {len(body):,} characters; keep them under {MAX_BODY_CHARS:,}")
    description = meta.get("description", "")
    if not description:
        first = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip()), "")
        description = first
        warnings.append("no description: using the first line of the instructions")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1] + "…"
    return (
        Skill(
            name=name, description=description, body=body, arguments=meta.get("arguments", ""), source=source
        ),
        warnings,
    )


def builtin_skills() -> dict[str, Skill]:
    """The built-ins shipped in `agent/skills_builtin/*.md` (`daily_brief` is also what `/brief now`
    and scheduled briefs run)."""
    out: dict[str, Skill] = {}
    folder = resources.files("agent.skills_builtin")
    for name in BUILTIN_NAMES:
        text = folder.joinpath(f"{name}.md").read_text(encoding="utf-8")
        skill, _ = parse_skill(text, fallback_name=name)
        out[skill.name] = Skill(
            name=skill.name,
            description=skill.description,
            body=skill.body,
            arguments=skill.arguments,
            builtin=True,
        )
    return out


def _scan(directory: Path | None, reserved: Iterable[str]) -> tuple[dict[str, Skill], list[str]]:
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    if directory is None or not directory.is_dir():
        return skills, problems
    reserved = set(reserved)
    builtins = set(BUILTIN_NAMES)
    for path in sorted(directory.glob("*.md")):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8 text")
            continue
        except OSError as exc:
            problems.append(f"{path}: cannot be read ({exc.strerror or exc})")
            continue
        try:
            skill, warnings = parse_skill(
                text, fallback_name=path.stem.lower().replace("-", "_"), source=path
            )
        except SkillError as exc:
            problems.append(f"{path}: {exc}")
            continue
        problems.extend(f"{path}: {w}" for w in warnings)
        if skill.name in reserved:
            problems.append(f"{path}: the name {skill.name!r} is a chat command already; choose another")
            continue
        if skill.name in skills:
            problems.append(
                f"{path}: duplicate skill {skill.name!r} (also in {skills[skill.name].source}); ignored"
            )
            continue
        if skill.name in builtins:
            skill = Skill(
                name=skill.name,
                description=skill.description,
                body=skill.body,
                arguments=skill.arguments,
                source=path,
                overrides_builtin=True,
            )
        skills[skill.name] = skill
    return skills, problems


def load_skills(
    user_dir: Path | None = None, *, reserved: Iterable[str] = RESERVED_COMMANDS
) -> tuple[dict[str, Skill], list[str]]:
    """Built-ins plus the user's skills (a user skill overrides a built-in of the same name).
    Returns the skills in a stable order (built-ins first) and the problems found."""
    skills = builtin_skills()
    user, problems = _scan(user_dir, reserved)
    skills.update(user)
    return skills, problems


def check_skills(directory: Path, *, reserved: Iterable[str] = RESERVED_COMMANDS) -> list[str]:
    """Problems with the skill files in `directory`, one line each ("path: what is wrong");
    empty when everything is fine. Used by `tapebot skills check`."""
    if not directory.exists():
        return []
    if not directory.is_dir():
        return [f"{directory}: not a directory"]
    return _scan(directory, reserved)[1]


class SkillLibrary:
    """The skills a deployment serves; put one in `Deps` for `execute_skill`. `reload()` rescans
    the user folder (the body of a user skill is re-read when it is executed, so edits apply
    without a restart)."""

    def __init__(self, user_dir: Path | None = None, *, reserved: Iterable[str] = RESERVED_COMMANDS):
        self.user_dir = user_dir
        self.reserved = frozenset(reserved)
        self.skills: dict[str, Skill] = {}
        self.problems: list[str] = []
        self.reload()

    def reload(self) -> None:
        self.skills, self.problems = load_skills(self.user_dir, reserved=self.reserved)

    def get(self, name: str) -> Skill | None:
        skill = self.skills.get(name.strip().lstrip("/").lower())
        if skill is None or skill.source is None:
            return skill
        try:  # lazy: the current file content, falling back to what was loaded
            fresh, _ = parse_skill(skill.source.read_text(encoding="utf-8"), fallback_name=skill.name)
        except (OSError, UnicodeDecodeError, SkillError):
            return skill
        if fresh.name != skill.name:
            return skill
        return Skill(
            name=skill.name,
            description=fresh.description,
            body=fresh.body,
            arguments=fresh.arguments,
            source=skill.source,
            overrides_builtin=skill.overrides_builtin,
        )

    def __iter__(self) -> Iterator[Skill]:
        return iter(self.skills.values())


# ---- surfaces ---------------------------------------------------------------------------------
def skills_prompt(skills: Iterable[Skill] | dict[str, Skill]) -> str:
    """Names and descriptions only, for `system_dynamic`; the bodies stay out of the context."""
    items = list(skills.values()) if isinstance(skills, dict) else list(skills)
    if not items:
        return ""
    lines = [
        "<system-reminder>",
        "Skills are preset workflows. When the user's request matches one (or they type /name), call "
        "execute_skill with its name and any arguments, then follow the instructions it returns.",
    ]
    for s in items:
        hint = f" (arguments: {s.arguments})" if s.arguments else ""
        lines.append(f"- {s.name}: {s.description}{hint}")
    lines.append("</system-reminder>")
    return "\n".join(lines)


def skill_commands(skills: Iterable[Skill] | dict[str, Skill]) -> list[tuple[str, str]]:
    """(command, description) pairs for Telegram's command menu and Discord slash commands
    (descriptions within both platforms' limits: 3-100 characters)."""
    items = list(skills.values()) if isinstance(skills, dict) else list(skills)
    out = []
    for s in items:
        desc = s.description or s.name
        if len(desc) < 3:
            desc = f"{desc} skill"
        out.append((s.name, desc[:MAX_DESCRIPTION]))
    return out


def skill_turn_text(skill: Skill, args: str = "") -> str:
    """The user message the gateway sends when someone types `/checkup …`: the command as typed,
    with the skill's instructions inlined (the intent is explicit, so no execute_skill round)."""
    typed = f"/{skill.name} {args.strip()}".rstrip()
    return f'{typed}\n\n<skill name="{skill.name}">\n{skill.render(args)}\n</skill>'


# ---- the tool ---------------------------------------------------------------------------------
skill_tools = Toolset("skills")


@skill_tools.tool(concurrency_safe=True, side_effect="read_only")
async def execute_skill(ctx: ToolContext, name: str, arguments: str = "") -> dict[str, Any]:
    """Load a skill's full instructions (a preset workflow such as checkup or screen) and follow them.

    Args:
        name: the skill's name, as listed in the skills reminder (without the slash).
        arguments: what the user gave with it, e.g. a stock code; empty if nothing.
    """
    library = ctx.deps.maybe(SkillLibrary)
    if library is None:
        skills = builtin_skills()
        skill = skills.get(name.strip().lstrip("/").lower())
    else:
        skills = library.skills
        skill = library.get(name)
    if skill is None:
        known = ", ".join(sorted(skills)) or "none"
        raise ToolFailed(f"no skill named {name!r}; available skills: {known}")
    return {
        "status": "success",
        "skill": skill.name,
        "instructions": skill.render(arguments),
        "note": "Follow these instructions now, using your tools.",
    }


# ---- command line -----------------------------------------------------------------------------
def skills_cli(argv: list[str], skills_dir: Path, out: TextIO | None = None) -> int:
    """`tapebot skills [list|check]`: list the skills (built-in, user, overrides) or check the
    user folder. `check` exits 1 when a file has a problem."""
    import sys

    out = out or sys.stdout
    action = argv[0] if argv else "list"
    if action not in ("list", "check"):
        print("usage: tapebot skills [list|check]", file=out)
        return 2
    if action == "check":
        problems = check_skills(skills_dir)
        for line in problems:
            print(line, file=out)
        count = len(_scan(skills_dir, RESERVED_COMMANDS)[0])
        print(f"{count} user skill(s) in {skills_dir}; {len(problems)} problem(s)", file=out)
        return 1 if problems else 0
    skills, problems = load_skills(skills_dir)
    for s in skills.values():
        origin = "built-in" if s.builtin else ("overrides built-in" if s.overrides_builtin else str(s.source))
        print(f"/{s.name:<12} {s.description}  [{origin}]", file=out)
    if problems:
        print(f"{len(problems)} problem(s): run `tapebot skills check`", file=out)
    return 0
