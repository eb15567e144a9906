"""Skills: built-ins, front matter, user overrides, invalid files, lazy loading, surfaces."""

from __future__ import annotations

import json

import pytest

from agent.errors import ToolFailed
from agent.inmemory import InMemoryStore
from agent.providers.scripted import ScriptedClient, reply
from agent.runtime import AgentRuntime, TurnRequest
from agent.skills import (
    BUILTIN_NAMES,
    SkillError,
    SkillLibrary,
    builtin_skills,
    check_skills,
    execute_skill,
    load_skills,
    parse_skill,
    skill_commands,
    skill_tools,
    skill_turn_text,
    skills_prompt,
)
from agent.tools.registry import Deps, ToolContext

DCF = """---
name: dcf
description: DCF valuation of one stock
arguments: stock code or name
---
Run a DCF valuation of {user_input}. Use analyze_stock first.
"""


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_five_builtins_with_descriptions_and_placeholders():
    skills = builtin_skills()
    assert (
        list(skills)
        == ["screen", "checkup", "report", "strategy", "backtest", "daily_brief"]
        == list(BUILTIN_NAMES)
    )
    for skill in skills.values():
        assert skill.builtin and skill.description and len(skill.description) <= 100
        assert "{arguments}" in skill.body  # every built-in takes what the user typed
        assert "{" not in skill.render("600519")


def test_front_matter_parsing():
    skill, warnings = parse_skill(DCF)
    assert (skill.name, skill.description, skill.arguments) == (
        "dcf",
        "DCF valuation of one stock",
        "stock code or name",
    )
    assert skill.body.startswith("Run a DCF valuation") and warnings == []
    assert skill.render("600519") == "Run a DCF valuation of 600519. Use analyze_stock first."
    assert "no arguments" in skill.render("")


def test_no_front_matter_uses_file_name_and_first_line():
    skill, warnings = parse_skill(
        "# Quick momentum check\nLook at 20-day momentum.", fallback_name="momentum"
    )
    assert skill.name == "momentum" and skill.description == "Quick momentum check"
    assert warnings and "first line" in warnings[0]
    # without a placeholder the arguments are appended
    assert skill.render("300750").endswith("Arguments: 300750")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nname: Bad-Name\ndescription: x\n---\nbody", "invalid name"),
        ("---\nname: ok\ndescription: x\nbody without closing", "never ends"),
        ("---\nname: ok\n  nested: 1\n---\nbody", "not `key: value`"),
        ("---\nname: ok\ndescription: x\n---\n\n", "no instructions"),
        ("---\nname: 1abc\n---\nbody", "invalid name"),
    ],
)
def test_invalid_skills_raise_with_a_reason(text, message):
    with pytest.raises(SkillError) as info:
        parse_skill(text)
    assert message in str(info.value)


def test_user_skills_add_and_override_builtins(tmp_path):
    folder = tmp_path / "skills"
    write(folder, "dcf.md", DCF)
    write(folder, "mycheckup.md", "---\nname: checkup\ndescription: My own checkup\n---\nOnly look at cash.")
    skills, problems = load_skills(folder)
    assert problems == []
    assert list(skills)[: len(BUILTIN_NAMES)] == list(BUILTIN_NAMES) and "dcf" in skills
    assert skills["checkup"].description == "My own checkup" and skills["checkup"].overrides_builtin
    assert not skills["checkup"].builtin and skills["screen"].builtin


def test_invalid_files_are_reported_not_crashed_on(tmp_path):
    folder = tmp_path / "skills"
    write(folder, "good.md", DCF)
    write(folder, "bad_name.md", "---\nname: Bad Name\ndescription: x\n---\nbody")
    write(folder, "broken.md", "---\nname: broken\n")
    write(folder, "help.md", "---\nname: help\ndescription: shadows /help\n---\nbody")
    write(folder, "dup.md", DCF)
    write(folder, "extra.md", "---\nname: extra\ndescription: fine\ncolor: blue\n---\nbody")
    (folder / "latin1.md").write_bytes("---\nname: x\n---\ncaf\xe9".encode("latin-1"))
    write(folder, "notes.txt", "not a skill")
    skills, problems = load_skills(folder)
    assert {"dcf", "extra"} <= set(skills) and "help" not in skills and "broken" not in skills
    text = "\n".join(problems)
    assert "bad_name.md: invalid name" in text
    assert "broken.md: front matter starts with --- but never ends" in text
    assert "help.md: the name 'help' is a chat command" in text
    assert "duplicate skill 'dcf'" in text
    assert "extra.md: unknown front-matter key 'color'" in text
    assert "latin1.md: not UTF-8" in text
    assert check_skills(folder) == problems
    assert check_skills(tmp_path / "missing") == []


def test_prompt_lists_only_names_and_descriptions(tmp_path):
    write(tmp_path, "dcf.md", DCF)
    library = SkillLibrary(tmp_path)
    prompt = skills_prompt(library.skills)
    assert prompt.startswith("<system-reminder>") and prompt.endswith("</system-reminder>")
    assert "- dcf: DCF valuation of one stock" in prompt and "- checkup:" in prompt
    assert "Run a DCF valuation" not in prompt  # bodies stay out of the context
    assert "Portfolio health" in prompt and "Call portfolio to get" not in prompt
    assert skills_prompt({}) == ""


def test_commands_and_turn_text(tmp_path):
    write(tmp_path, "dcf.md", DCF)
    library = SkillLibrary(tmp_path)
    commands = dict(skill_commands(library.skills))
    assert (
        commands["checkup"].startswith("Portfolio health check")
        and commands["dcf"] == "DCF valuation of one stock"
    )
    assert all(3 <= len(d) <= 100 for d in commands.values())
    text = skill_turn_text(library.skills["dcf"], "600519")
    assert text.startswith('/dcf 600519\n\n<skill name="dcf">')
    assert "DCF valuation of 600519" in text and text.endswith("</skill>")


async def test_execute_skill_loads_the_body_lazily_and_sees_edits(tmp_path):
    path = write(tmp_path, "dcf.md", DCF)
    library = SkillLibrary(tmp_path)
    ctx = ToolContext(deps=Deps(library))
    out = await execute_skill(ctx, "dcf", "600519")
    assert out["status"] == "success" and out["instructions"].startswith("Run a DCF valuation of 600519")
    path.write_text(
        DCF.replace("Use analyze_stock first.", "Use search_stock_by_name first."), encoding="utf-8"
    )
    out = await execute_skill(ctx, "/dcf", "600519")
    assert "search_stock_by_name" in out["instructions"]
    builtin = await execute_skill(ctx, "checkup")
    assert "portfolio" in builtin["instructions"]
    with pytest.raises(ToolFailed) as info:
        await execute_skill(ctx, "nope")
    assert "available skills" in str(info.value) and "dcf" in str(info.value)


async def test_execute_skill_without_a_library_serves_builtins():
    out = await execute_skill(ToolContext(), "screen", "springs only")
    assert "springs only" in out["instructions"]


def test_execute_skill_spec():
    spec = skill_tools.get("execute_skill").spec
    assert spec.concurrency_safe and not spec.requires_approval and spec.side_effect == "read_only"


async def test_model_calls_execute_skill_in_a_turn(tmp_path):
    write(tmp_path, "dcf.md", DCF)
    library = SkillLibrary(tmp_path)
    client = ScriptedClient(
        [reply(tool_calls=[("execute_skill", {"name": "dcf", "arguments": "600519"})]), reply("ok")]
    )
    runtime = AgentRuntime(
        model_for=lambda _m: client,
        tools=skill_tools,
        store=InMemoryStore(),
        deps=Deps(library),
        workspace=tmp_path,
    )
    request = TurnRequest("s1", "value 600519", system_dynamic=skills_prompt(library.skills))
    events = [e async for e in runtime.run(request)]
    assert events[-1].status == "completed"
    assert client.requests[0].system_dynamic.startswith("<system-reminder>")
    result = next(m for m in client.requests[1].messages if m.role == "tool").tool_results[0]
    assert json.loads(result.content)["instructions"].startswith("Run a DCF valuation of 600519")


def test_skills_cli(tmp_path):
    import io

    from agent.skills import skills_cli

    write(tmp_path, "dcf.md", DCF)
    out = io.StringIO()
    assert skills_cli(["list"], tmp_path, out) == 0
    assert "/dcf" in out.getvalue() and "/checkup" in out.getvalue()
    out = io.StringIO()
    assert skills_cli(["check"], tmp_path, out) == 0 and "0 problem(s)" in out.getvalue()
    write(tmp_path, "bad.md", "---\nname: Bad\n---\nx")
    out = io.StringIO()
    assert skills_cli(["check"], tmp_path, out) == 1 and "bad.md: invalid name" in out.getvalue()
