"""config.loader: file + env merge, zero-config start, and one-line errors naming file, key and fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.errors import ConfigError as AgentConfigError
from agent.errors import TapebotError
from config.errors import ConfigError
from config.loader import load_settings, mask, mask_secret
from config.settings import Settings

ANTHROPIC = """
[[models]]
id = "main"
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "ANTHROPIC_API_KEY"
input_per_1m = 3.0
output_per_1m = 15.0
"""

BACKUP = """
[[models]]
id = "backup"
provider = "openai"
model = "deepseek-chat"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-literal-backup-key-0000"
"""

KEY = "sk-ant-api03-test-secret-WXYZ"


def write(home: Path, text: str) -> Path:
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load(home: Path, env: dict[str, str] | None = None, **kw) -> Settings:
    return load_settings(home, {} if env is None else env, **kw)


def error(home: Path, env: dict[str, str] | None = None, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        load(home, env, **kw)
    text = str(info.value)
    assert "\n" not in text
    return text


# ---- merging -----------------------------------------------------------------------------------
def test_file_values_and_defaults(tmp_path):
    write(tmp_path, ANTHROPIC + BACKUP + '\n[agent]\nmodel = "main"\nfallbacks = ["backup"]\n')
    s = load(tmp_path, {"ANTHROPIC_API_KEY": KEY})
    assert [m.id for m in s.model_chain()] == ["main", "backup"]
    assert s.model("main").resolved_api_key(s.environ) == KEY
    assert s.api_key("backup") == "sk-literal-backup-key-0000"
    assert s.agent.max_tool_rounds == 15 and s.agent.stream_idle_timeout == 60
    assert s.home == tmp_path.absolute()
    assert s.db_url == f"sqlite+aiosqlite:///{tmp_path.absolute() / 'tapebot.db'}"
    assert s.traces_dir == tmp_path / "traces" and s.skills_dir == tmp_path / "skills"


def test_env_overrides_file_with_double_underscore_nesting(tmp_path):
    write(tmp_path, ANTHROPIC + BACKUP + "\n[agent]\nmax_tool_rounds = 9\n")
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "TAPEBOT_AGENT__MODEL": "backup",
        "TAPEBOT_AGENT__MAX_TOOL_ROUNDS": "4",
        "TAPEBOT_TELEGRAM__ALLOWED_USERS": "[11, 22]",
        "TAPEBOT_LOG_LEVEL": "debug",
    }
    s = load(tmp_path, env)
    assert s.agent.model == "backup"
    assert s.agent.max_tool_rounds == 4
    assert s.telegram.allowed_users == [11, 22]
    assert s.log_level == "DEBUG"


def test_model_override_argument(tmp_path):
    write(tmp_path, ANTHROPIC + BACKUP)
    s = load(tmp_path, {"ANTHROPIC_API_KEY": KEY}, model="backup")
    assert s.agent.model == "backup"


def test_first_model_is_default_when_none_is_called_main(tmp_path):
    write(tmp_path, BACKUP)
    assert load(tmp_path).agent.model == "backup"


def test_tapebot_home_from_environment(tmp_path):
    write(tmp_path, BACKUP)
    s = load_settings(None, {"TAPEBOT_HOME": str(tmp_path)})
    assert s.home == tmp_path.absolute() and s.config_path == tmp_path / "config.toml"


def test_ensure_dirs(tmp_path):
    s = load(tmp_path / "new-home", require_model=False)
    s.ensure_dirs()
    for d in (s.traces_dir, s.results_dir, s.workspace_dir, s.archive_dir, s.skills_dir):
        assert d.is_dir()


# ---- zero-config start -------------------------------------------------------------------------
def test_no_config_anthropic_from_env(tmp_path):
    s = load(tmp_path, {"ANTHROPIC_API_KEY": KEY})
    m = s.model(s.agent.model)
    assert (m.provider, m.model, m.api_key_env) == ("anthropic", "claude-sonnet-4-5", "ANTHROPIC_API_KEY")
    assert s.api_key("main") == KEY


def test_no_config_openai_from_env_with_base_url_and_model(tmp_path):
    env = {
        "OPENAI_API_KEY": "sk-openai-xyz",
        "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
        "OPENAI_MODEL": "qwen2.5",
    }
    m = load(tmp_path, env).model("main")
    assert (m.provider, m.model, m.base_url) == ("openai", "qwen2.5", "http://127.0.0.1:11434/v1")


def test_no_config_openai_default_model(tmp_path):
    m = load(tmp_path, {"OPENAI_API_KEY": "sk-openai-xyz"}).model("main")
    assert (m.provider, m.model, m.base_url) == ("openai", "gpt-4o-mini", None)


def test_anthropic_preferred_when_both_keys_are_set(tmp_path):
    assert (
        load(tmp_path, {"OPENAI_API_KEY": "a" * 20, "ANTHROPIC_API_KEY": KEY}).model("main").provider
        == "anthropic"
    )


def test_nothing_configured_says_what_to_set(tmp_path):
    path = tmp_path / "config.toml"
    assert error(tmp_path) == (
        "no model configured: set ANTHROPIC_API_KEY, or OPENAI_API_KEY (optionally OPENAI_BASE_URL and "
        f"OPENAI_MODEL), or add a [[models]] table to {path} — run `tapebot init` for a commented starter config"
    )


def test_commands_without_a_model_still_load(tmp_path):
    s = load(tmp_path, require_model=False)
    assert s.models == [] and s.db_url.endswith("tapebot.db")


# ---- errors: one line naming file, key, fix ----------------------------------------------------
def test_bad_toml_names_line_and_column(tmp_path):
    path = write(tmp_path, "[agent]\nmodel = \n")
    text = error(tmp_path)
    assert re.fullmatch(
        re.escape(f"{path}: invalid TOML at line 2, column ") + r"\d+: .+ — fix the syntax there", text
    ), text


def test_unknown_provider(tmp_path):
    path = write(tmp_path, ANTHROPIC.replace('"anthropic"', '"gemini"', 1))
    assert error(tmp_path, {"ANTHROPIC_API_KEY": KEY}) == (
        f"{path}: key 'models[0].provider': unknown provider 'gemini' — use \"anthropic\" or \"openai\" "
        "(any OpenAI-compatible endpoint, with base_url)"
    )


def test_missing_api_key_env(tmp_path):
    path = write(tmp_path, ANTHROPIC)
    assert error(tmp_path) == (
        f"{path}: key 'models[0].api_key_env': model 'main' reads its API key from $ANTHROPIC_API_KEY, "
        f"which is not set — set ANTHROPIC_API_KEY or put api_key in {path}"
    )


def test_missing_key_of_a_fallback(tmp_path):
    path = write(
        tmp_path,
        BACKUP
        + ANTHROPIC.replace('"main"', '"claude"')
        + '[agent]\nmodel = "backup"\nfallbacks = ["claude"]\n',
    )
    assert error(tmp_path).startswith(
        f"{path}: key 'models[1].api_key_env': model 'claude' reads its API key"
    )


def test_fallback_naming_no_model(tmp_path):
    path = write(tmp_path, ANTHROPIC + '\n[agent]\nfallbacks = ["backup"]\n')
    assert error(tmp_path, {"ANTHROPIC_API_KEY": KEY}) == (
        f"{path}: key 'agent.fallbacks[0]': names no model 'backup' (declared: main) "
        "— remove it or add a [[models]] table with that id"
    )


def test_agent_model_naming_no_model(tmp_path):
    path = write(tmp_path, ANTHROPIC + '\n[agent]\nmodel = "gpt"\n')
    assert error(tmp_path, {"ANTHROPIC_API_KEY": KEY}) == (
        f"{path}: key 'agent.model': names no model 'gpt' (declared: main) — set it to one of the [[models]] ids"
    )


def test_agent_model_from_env_names_the_variable(tmp_path):
    write(tmp_path, ANTHROPIC)
    text = error(tmp_path, {"ANTHROPIC_API_KEY": KEY, "TAPEBOT_AGENT__MODEL": "nope"})
    assert text.startswith("environment: key 'TAPEBOT_AGENT__MODEL': names no model 'nope'")


def test_unknown_top_level_key_suggests_closest(tmp_path):
    path = write(tmp_path, '[[modles]]\nid = "x"\n')
    assert error(tmp_path) == f"{path}: key 'modles': unknown key — did you mean 'models'?"


def test_unknown_nested_key_suggests_closest(tmp_path):
    path = write(tmp_path, ANTHROPIC + "\n[agent]\nmax_tool_round = 3\n")
    assert error(tmp_path, {"ANTHROPIC_API_KEY": KEY}) == (
        f"{path}: key 'agent.max_tool_round': unknown key — did you mean 'max_tool_rounds'?"
    )


def test_missing_required_model_field(tmp_path):
    path = write(tmp_path, '[[models]]\nid = "main"\nprovider = "openai"\n')
    assert error(tmp_path) == f"{path}: key 'models[0].model': is required — add model = …"


def test_duplicate_model_ids(tmp_path):
    path = write(tmp_path, BACKUP + BACKUP)
    assert (
        error(tmp_path)
        == f"{path}: key 'models[1].id': duplicate model id 'backup' — give each model its own id"
    )


def test_bad_value_from_env_names_the_variable(tmp_path):
    write(tmp_path, BACKUP)
    text = error(tmp_path, {"TAPEBOT_AGENT__MAX_TOOL_ROUNDS": "many"})
    assert text.startswith(
        "environment: key 'TAPEBOT_AGENT__MAX_TOOL_ROUNDS': Input should be a valid integer"
    )


def test_bad_json_in_env(tmp_path):
    write(tmp_path, BACKUP)
    assert error(tmp_path, {"TAPEBOT_TELEGRAM__ALLOWED_USERS": "[1,"}) == (
        "environment: key 'TAPEBOT_TELEGRAM__ALLOWED_USERS': is not valid JSON — lists and tables must be JSON, e.g. '[1, 2]'"
    )


def test_mcp_server_needs_exactly_one_transport(tmp_path):
    path = write(tmp_path, BACKUP + '\n[[mcp_servers]]\nname = "x"\n')
    assert error(tmp_path) == (
        f"{path}: key 'mcp_servers[0]': set exactly one of command (a stdio server) or url (an HTTP server)"
    )


def test_config_error_is_part_of_the_agent_tree():
    assert AgentConfigError is ConfigError and issubclass(ConfigError, TapebotError)


# ---- platforms ---------------------------------------------------------------------------------
def test_platforms_enabled_when_token_available(tmp_path):
    write(tmp_path, BACKUP)
    s = load(tmp_path, {"TELEGRAM_BOT_TOKEN": "123456:telegram-token-abc"})
    assert s.telegram.enabled is True and s.discord.enabled is False
    assert s.telegram.resolved_token(s.environ) == "123456:telegram-token-abc"


def test_run_needs_a_platform(tmp_path):
    path = write(tmp_path, BACKUP)
    assert error(tmp_path, require_platform=True).startswith(
        "no chat platform is enabled: set TELEGRAM_BOT_TOKEN"
    )
    write(tmp_path, BACKUP + "\n[discord]\nenabled = true\n")
    assert error(tmp_path, require_platform=True) == (
        f"{path}: key 'discord.enabled': is true but there is no bot token — set DISCORD_BOT_TOKEN or put token in [discord]"
    )


def test_webhook_mode_needs_url(tmp_path):
    path = write(tmp_path, BACKUP + '\n[telegram]\nmode = "webhook"\n')
    assert error(tmp_path).startswith(f"{path}: key 'telegram': mode = 'webhook' needs webhook_url")


# ---- secrets -----------------------------------------------------------------------------------
def test_secret_values_and_mask(tmp_path):
    write(tmp_path, ANTHROPIC + BACKUP)
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "TELEGRAM_BOT_TOKEN": "123456:telegram-token-abc",
        "DISCORD_BOT_TOKEN": "discord-tok",
    }
    s = load(tmp_path, env)
    assert set(s.secret_values()) == {
        KEY,
        "sk-literal-backup-key-0000",
        "123456:telegram-token-abc",
        "discord-tok",
    }
    shown = mask(s)
    assert shown["models"][0]["api_key"] == "sk-…WXYZ"
    assert shown["telegram"]["token"] == "123…-abc"
    assert shown["discord"]["token"] == "***"
    flat = repr(shown)
    for secret in s.secret_values():
        assert secret not in flat


def test_mask_database_password(tmp_path):
    write(tmp_path, BACKUP)
    s = load(tmp_path, {"TAPEBOT_DATABASE_URL": "postgresql+asyncpg://bot:hunter2-long@db/tapebot"})
    assert mask(s)["database_url"] == "postgresql+asyncpg://bot:***@db/tapebot"
    assert "hunter2-long" in s.secret_values()


def test_mask_secret_shapes():
    assert mask_secret(None) is None
    assert mask_secret("short") == "***"
    assert mask_secret("sk-1234567890abcdef") == "sk-…cdef"


def test_sections_resolve_against_the_loaded_environment(tmp_path, monkeypatch):
    # Providers call `cfg.resolved_api_key()` with no argument: it must use the environment the
    # settings were loaded from, not os.environ.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    write(tmp_path, ANTHROPIC)
    s = load(tmp_path, {"ANTHROPIC_API_KEY": KEY, "TELEGRAM_BOT_TOKEN": "123456:tg-token-xyz"})
    assert s.model("main").resolved_api_key() == KEY
    assert s.telegram.resolved_token() == "123456:tg-token-xyz"
    assert s.model("main").resolved_api_key({}) is None  # an explicit mapping still wins


def test_every_problem_is_named_in_one_run(tmp_path):
    """One `config check` names each broken key (briefly, on the same line), not just the first."""
    write(tmp_path, "[agent]\nlanguage = 5\nmax_roundz = 3\n[telegram]\nallowed_users = 7\n")
    text = error(tmp_path)
    assert "key 'agent.language'" in text
    assert "'agent.max_roundz'" in text and "'telegram.allowed_users'" in text
    assert "more problem" not in text


def test_a_long_list_of_problems_is_cut_short(tmp_path):
    keys = "".join(f"bogus{i} = 1\n" for i in range(8))
    write(tmp_path, "[agent]\n" + keys)
    text = error(tmp_path)
    assert text.count("'agent.bogus") == 4 and "4 more" in text


def test_alert_poll_interval_default_off_and_floor(tmp_path):
    assert load(tmp_path, {"ANTHROPIC_API_KEY": KEY}).markets.alert_poll_s == 60
    assert (
        load(tmp_path, {"ANTHROPIC_API_KEY": KEY, "TAPEBOT_MARKETS__ALERT_POLL_S": "0"}).markets.alert_poll_s
        == 0
    )
    write(tmp_path, "[markets]\nalert_poll_s = 5\n")
    assert "alert_poll_s is 0 (off) or at least 10 seconds" in error(tmp_path, {"ANTHROPIC_API_KEY": KEY})
