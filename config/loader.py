"""Load `Settings` from `<home>/config.toml` plus `TAPEBOT_*` environment overrides.

Order (later wins): built-in defaults < config.toml < environment. Every failure is a `ConfigError`
whose text is one line naming the file (or environment variable), the key and the fix.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr, ValidationError

from config.errors import ConfigError
from config.settings import ModelConfig, Settings, default_home

if TYPE_CHECKING:
    from pydantic_settings import BaseSettings

ENV_PREFIX = "TAPEBOT_"
INIT_HINT = "run `tapebot init` for a commented starter config"


def resolve_home(home: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """`home` if given, else `$TAPEBOT_HOME`, else `~/.tapebot` (absolute)."""
    if home is not None:
        return Path(home).expanduser().absolute()
    return default_home(os.environ if environ is None else environ)


def load_settings(
    home: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    require_model: bool = True,
    require_platform: bool = False,
    model: str | None = None,
) -> Settings:
    """Read, merge, validate and cross-check the configuration.

    require_model: the command talks to a model, so the agent model, its fallbacks and their API keys
        must resolve (commands such as `db upgrade` or `usage` pass False).
    require_platform: the command runs the chat bot, so at least one of Telegram/Discord must be on
        and every enabled platform must have its token.
    model: override `agent.model` (e.g. `tapebot chat --model backup`).
    """
    env: dict[str, str] = dict(os.environ if environ is None else environ)
    home_path = resolve_home(home, env)
    path = home_path / "config.toml"

    file_data = _read_toml(path)
    _check_top_level_keys(file_data, path)
    env_data = _env_overrides(env)
    data = _deep_merge(file_data, env_data)
    data["home"] = str(home_path)  # the file lives in home; it cannot move it
    if model:
        data.setdefault("agent", {})["model"] = model

    if not data.get("models"):
        fallback = _model_from_env(env)
        if fallback is not None:
            data["models"] = [fallback]

    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, path, env) from None
    settings.bind_environ(env)

    # The default agent model is "main"; with models declared but none called that, use the first.
    agent_model_given = "model" in (data.get("agent") or {})
    if not agent_model_given and settings.models and all(m.id != "main" for m in settings.models):
        settings.agent.model = settings.models[0].id

    _check_models(settings, path, require_model=require_model)
    _resolve_platforms(settings, path, env, require_platform=require_platform)
    return settings


# ---- reading -----------------------------------------------------------------------------------
def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the config file ({exc.strerror})", file=str(path)) from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError("the file is not UTF-8 text", file=str(path), fix="save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        where = _toml_position(exc)
        raise ConfigError(
            f"invalid TOML{where}: {_toml_reason(exc)}", file=str(path), fix="fix the syntax there"
        ) from None


def _toml_position(exc: tomllib.TOMLDecodeError) -> str:
    line, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if line is None:  # Python < 3.14 only has the position inside the message
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (found.group(1), found.group(2)) if found else (None, None)
    if line:
        return f" at line {line}, column {col}"
    return " at the end of the file" if "end of document" in str(exc) else ""


def _toml_reason(exc: tomllib.TOMLDecodeError) -> str:
    text = getattr(exc, "msg", None) or str(exc)
    return re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", text)


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """`TAPEBOT_AGENT__MODEL=x` -> {"agent": {"model": "x"}}; JSON for list/dict values
    (`TAPEBOT_TELEGRAM__ALLOWED_USERS=[1,2]`). Parsed by pydantic-settings' own env source, so the
    rules are exactly its rules, reading the mapping we were given rather than os.environ. Without
    overrides (the usual case) pydantic-settings is not imported at all (a function-level import)."""
    lowered = {k.lower(): v for k, v in env.items() if k.upper().startswith(ENV_PREFIX) and v != ""}
    lowered.pop("tapebot_home", None)  # resolved separately: it locates the file
    if not lowered:
        return {}
    from pydantic_settings import EnvSettingsSource
    from pydantic_settings.exceptions import SettingsError

    try:
        source = EnvSettingsSource(_settings_from_env())
        source.env_vars = lowered  # the source's parsed variables: ours, not the process's
        return dict(source())
    except SettingsError as exc:
        bad = next((k for k, v in env.items() if k.upper().startswith(ENV_PREFIX) and _bad_json(v)), None)
        if bad:
            raise ConfigError(
                "is not valid JSON",
                file="environment",
                key=bad,
                fix="lists and tables must be JSON, e.g. '[1, 2]'",
            ) from None
        raise ConfigError(str(exc), file="environment") from None


@functools.cache
def _settings_from_env() -> type[BaseSettings]:
    """`Settings` as pydantic-settings sees it: its fields, with the environment's naming rules."""
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class SettingsFromEnv(Settings, BaseSettings):
        model_config = SettingsConfigDict(
            env_prefix=ENV_PREFIX, env_nested_delimiter="__", case_sensitive=False
        )

    return SettingsFromEnv


def _bad_json(value: str) -> bool:
    value = value.strip()
    if not value.startswith(("[", "{")):
        return False
    try:
        json.loads(value)
    except ValueError:
        return True
    return False


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _model_from_env(env: Mapping[str, str]) -> dict[str, Any] | None:
    """Zero-config start: a model from the vendors' usual environment variables."""
    if env.get("ANTHROPIC_API_KEY"):
        model: dict[str, Any] = {
            "id": "main",
            "provider": "anthropic",
            "model": env.get("ANTHROPIC_MODEL") or "claude-sonnet-4-5",
            "api_key_env": "ANTHROPIC_API_KEY",
        }
        if env.get("ANTHROPIC_BASE_URL"):
            model["base_url"] = env["ANTHROPIC_BASE_URL"]
        if model["model"] == "claude-sonnet-4-5":
            model.update(context_window=200_000, input_per_1m=3.0, output_per_1m=15.0)
        return model
    if env.get("OPENAI_API_KEY"):
        model = {
            "id": "main",
            "provider": "openai",
            "model": env.get("OPENAI_MODEL") or "gpt-4o-mini",
            "api_key_env": "OPENAI_API_KEY",
        }
        if env.get("OPENAI_BASE_URL"):
            model["base_url"] = env["OPENAI_BASE_URL"]
        elif model["model"] == "gpt-4o-mini":
            model.update(context_window=128_000, input_per_1m=0.15, output_per_1m=0.6)
        return model
    return None


# ---- checks ------------------------------------------------------------------------------------
def _check_top_level_keys(data: Mapping[str, Any], path: Path) -> None:
    known = [k for k in Settings.model_fields if k != "home"]
    for key in data:
        if key not in known:
            raise ConfigError("unknown key", file=str(path), key=key, fix=_suggest(key, known))


def _suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    return "known keys: " + ", ".join(sorted(known))


def _check_models(settings: Settings, path: Path, *, require_model: bool) -> None:
    file = str(path)
    seen: set[str] = set()
    for i, m in enumerate(settings.models):
        if m.id in seen:
            raise ConfigError(
                f"duplicate model id '{m.id}'",
                file=file,
                key=f"models[{i}].id",
                fix="give each model its own id",
            )
        seen.add(m.id)
    if not require_model:
        return
    if not settings.models:
        raise ConfigError(
            f"no model configured: set ANTHROPIC_API_KEY, or OPENAI_API_KEY (optionally OPENAI_BASE_URL "
            f"and OPENAI_MODEL), or add a [[models]] table to {file}",
            fix=INIT_HINT,
        )
    declared = ", ".join(sorted(seen))
    env = settings.environ
    if settings.agent.model not in seen:
        raise ConfigError(
            f"names no model '{settings.agent.model}' (declared: {declared})",
            **_source(("agent", "model"), env, path),
            fix="set it to one of the [[models]] ids",
        )
    for i, name in enumerate(settings.agent.fallbacks):
        if name not in seen:
            raise ConfigError(
                f"names no model '{name}' (declared: {declared})",
                **_source(("agent", "fallbacks", i), env, path),
                fix="remove it or add a [[models]] table with that id",
            )
    if settings.memory.model is not None and settings.memory.model not in seen:
        raise ConfigError(
            f"names no model '{settings.memory.model}' (declared: {declared})",
            **_source(("memory", "model"), env, path),
            fix="set it to one of the [[models]] ids, or remove it to use the agent's model",
        )
    for m in settings.model_chain():
        _check_key(m, settings, file)


def _check_key(m: ModelConfig, settings: Settings, file: str) -> None:
    if m.resolved_api_key(settings.environ) is not None:
        return
    index = settings.models.index(m)
    if m.api_key_env:
        raise ConfigError(
            f"model '{m.id}' reads its API key from ${m.api_key_env}, which is not set",
            file=file,
            key=f"models[{index}].api_key_env",
            fix=f"set {m.api_key_env} or put api_key in {file}",
        )
    if m.provider == "anthropic" or not m.base_url:
        # Only self-hosted OpenAI-compatible servers (with a base_url) work without a key.
        raise ConfigError(
            f"model '{m.id}' has no API key",
            file=file,
            key=f"models[{index}]",
            fix=f'add api_key_env = "{"ANTHROPIC" if m.provider == "anthropic" else "OPENAI"}_API_KEY" '
            'or api_key = "…"',
        )


def _resolve_platforms(
    settings: Settings, path: Path, env: Mapping[str, str], *, require_platform: bool
) -> None:
    file = str(path)
    for name, section in (("telegram", settings.telegram), ("discord", settings.discord)):
        has_token = section.resolved_token(env) is not None
        if section.enabled is None:
            section.enabled = has_token
        elif section.enabled and not has_token and require_platform:
            raise ConfigError(
                "is true but there is no bot token",
                file=file,
                key=f"{name}.enabled",
                fix=f"set {section.token_env} or put token in [{name}]",
            )
    if require_platform and not (settings.telegram.enabled or settings.discord.enabled):
        raise ConfigError(
            "no chat platform is enabled: set TELEGRAM_BOT_TOKEN or DISCORD_BOT_TOKEN "
            f"(or put token in [telegram] / [discord] in {file})",
            fix="use `tapebot chat` to talk in the terminal",
        )


# ---- validation errors -------------------------------------------------------------------------
def _explain(exc: ValidationError, path: Path, env: Mapping[str, str]) -> ConfigError:
    err = exc.errors(include_url=False)[0]
    loc = tuple(err.get("loc", ()))
    source = _source(loc, env, path)
    kind = err.get("type", "")
    tail = _also(exc.errors(include_url=False)[1:], env)

    if kind == "extra_forbidden":
        known = _fields_at(loc[:-1])
        return ConfigError(f"unknown key{tail}", fix=_suggest(str(loc[-1]), known), **source)
    if kind == "missing":
        return ConfigError(f"is required{tail}", fix=f"add {loc[-1]} = …", **source)
    if kind == "literal_error" and loc and loc[-1] == "provider":
        value = err.get("input")
        return ConfigError(
            f"unknown provider '{value}'{tail}",
            fix='use "anthropic" or "openai" (any OpenAI-compatible endpoint, with base_url)',
            **source,
        )
    message = str(err.get("msg", "is invalid"))
    message = message.removeprefix("Value error, ")
    value = err.get("input")
    shown = "" if isinstance(value, dict | list | SecretStr) or value is None else f" (got {value!r})"
    return ConfigError(f"{message}{shown}{tail}", **source)


def _also(rest: Sequence[Mapping[str, Any]], env: Mapping[str, str], shown: int = 3) -> str:
    """The other problems, named briefly on the same line, so one run of `config check` shows what
    to fix instead of one problem per run."""
    if not rest:
        return ""
    items = []
    for err in rest[:shown]:
        loc = tuple(err.get("loc", ()))
        where = _env_var_for(loc, env) or _dotted(loc)
        message = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        items.append(f"'{where}': {message}")
    more = len(rest) - shown
    if more > 0:
        items.append(f"{more} more")
    return f" (also {'; '.join(items)})"


def _source(loc: tuple[int | str, ...], env: Mapping[str, str], path: Path) -> dict[str, str]:
    """Where a value came from: the TAPEBOT_* variable if one supplied it, else the file."""
    env_var = _env_var_for(loc, env)
    if env_var:
        return {"file": "environment", "key": env_var}
    return {"file": str(path), "key": _dotted(loc)}


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _env_var_for(loc: tuple[int | str, ...], env: Mapping[str, str]) -> str | None:
    """The TAPEBOT_* variable that supplied this value, if one did (it then wins over the file)."""
    names = {k.upper(): k for k in env}
    parts = [str(p) for p in loc if not isinstance(p, int)]
    for n in range(len(parts), 0, -1):
        candidate = ENV_PREFIX + "__".join(parts[:n]).upper()
        if candidate in names:
            return names[candidate]
    return None


def _fields_at(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = Settings
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            break
        inner = _model_type(field.annotation)
        if inner is None:
            break
        model = inner
    return [k for k in model.model_fields if not (model is Settings and k == "home")]


def _model_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_type(arg)
        if found is not None:
            return found
    return None


# ---- display -----------------------------------------------------------------------------------
def mask_secret(value: str | None) -> str | None:
    """`sk-ant-api03-…abcd` style: enough to recognise which key, never enough to use it."""
    if not value:
        return None
    if len(value) < 16:
        return "***"
    return f"{value[:3]}…{value[-4:]}"


def mask(settings: Settings) -> dict[str, Any]:
    """The effective configuration as plain data with every secret masked (for `tapebot config check`)."""
    env = settings.environ
    data = settings.model_dump(mode="python", exclude_none=False)
    out: dict[str, Any] = {
        "home": str(settings.home),
        "database_url": _mask_url(settings.db_url),
        "log_level": settings.log_level,
    }
    models = []
    for m, raw in zip(settings.models, data["models"], strict=True):
        raw = dict(raw)
        raw["api_key"] = mask_secret(m.resolved_api_key(env))
        models.append(raw)
    out["models"] = models
    for section in ("agent", "tools", "markets", "scheduler", "memory", "log"):
        out[section] = data[section]
    tg = dict(data["telegram"])
    tg["token"] = mask_secret(settings.telegram.resolved_token(env))
    tg["webhook_secret"] = mask_secret(settings.telegram.resolved_webhook_secret(env))
    out["telegram"] = tg
    dc = dict(data["discord"])
    dc["token"] = mask_secret(settings.discord.resolved_token(env))
    out["discord"] = dc
    out["mcp_servers"] = data["mcp_servers"]
    return {key: _plain(value) for key, value in out.items()}


def _mask_url(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
            return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "***"
    return url


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, SecretStr):
        return "***"
    if isinstance(value, Path):
        return str(value)
    return value
