"""`Settings` is a plain pydantic model (pydantic-settings is imported only when `TAPEBOT_*`
overrides exist); the overrides parse exactly as they did when `Settings` was a `BaseSettings`
with `env_prefix="TAPEBOT_"` and `env_nested_delimiter="__"`, and the defaults are the same."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from config.errors import ConfigError
from config.loader import _env_overrides
from config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


class _AsBaseSettings(Settings, BaseSettings):  # type: ignore[misc]
    """What `Settings` was: the same fields, declared as pydantic-settings' class."""

    model_config = SettingsConfigDict(
        env_prefix="TAPEBOT_", env_nested_delimiter="__", extra="forbid", validate_assignment=True
    )


def _reference(env: Mapping[str, str]) -> dict[str, object]:
    lowered = {k.lower(): v for k, v in env.items() if k.upper().startswith("TAPEBOT_") and v != ""}
    lowered.pop("tapebot_home", None)

    class _Source(EnvSettingsSource):
        def _load_env_vars(self) -> Mapping[str, str | None]:
            return lowered

    return dict(_Source(_AsBaseSettings)())


NAMES = [
    "TAPEBOT_AGENT__MODEL",
    "tapebot_agent__max_tool_rounds",
    "TAPEBOT_TELEGRAM__ALLOWED_USERS",
    "TAPEBOT_TELEGRAM__ENABLED",
    "TAPEBOT_LOG_LEVEL",
    "TAPEBOT_DATABASE_URL",
    "TAPEBOT_MEMORY__ENABLED",
    "TAPEBOT_MODELS",
    "TAPEBOT_HOME",
    "TAPEBOT_NOT_A_KEY",
    "TAPEBOT_AGENT__NOT_A_KEY",
    "OTHER_VAR",
]
VALUES = st.sampled_from(
    ["", "x", "4", "true", "[11, 22]", '{"a": 1}', '[{"id": "m"}]', "[1,", "null", "debug"]
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=5))
def test_overrides_parse_as_they_did_with_base_settings(env):
    try:
        expected: dict[str, object] | type[Exception] = _reference(env)
    except SettingsError:
        expected = ConfigError
    if expected is ConfigError:
        with pytest.raises(ConfigError):
            _env_overrides(env)
    else:
        assert _env_overrides(env) == expected


def test_the_defaults_are_those_of_the_base_settings_class():
    assert Settings().model_dump() == _AsBaseSettings.model_validate({}).model_dump()


def test_loading_without_overrides_does_not_import_pydantic_settings(tmp_path):
    code = (
        "import sys; from config.loader import load_settings; "
        f"load_settings({str(tmp_path)!r}, {{'TAPEBOT_HOME': {str(tmp_path)!r}}}, require_model=False); "
        "print('pydantic_settings' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"
