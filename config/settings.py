"""Typed settings. Every section is a pydantic model with `extra="forbid"`, so a misspelt key is an
error (the loader turns it into one line with a suggestion) rather than a silently ignored value.

Secrets are never required to sit in the file: each secret has a `*_env` field naming the environment
variable to read, and `resolved_*(env)` returns the value from either place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator

from config.errors import ConfigError

Provider = Literal["anthropic", "openai"]


def _secret(value: SecretStr | None) -> str | None:
    if value is None:
        return None
    raw = value.get_secret_value()
    return raw or None


def _from_env(env: Mapping[str, str], name: str | None) -> str | None:
    if not name:
        return None
    return env.get(name) or None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # The environment this section was loaded from (set by Settings.bind_environ), so that
    # `resolved_*()` without an argument resolves `*_env` names against it rather than os.environ.
    _environ: Mapping[str, str] | None = PrivateAttr(default=None)

    def _env(self, env: Mapping[str, str] | None) -> Mapping[str, str]:
        if env is not None:
            return env
        return os.environ if self._environ is None else self._environ


class ModelConfig(_Section):
    id: str = Field(min_length=1)  # our name for it ("main", "backup")
    provider: Provider
    model: str = Field(min_length=1)  # the vendor's model name
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: SecretStr | None = None
    context_window: int | None = Field(default=None, gt=0)
    input_per_1m: float = Field(default=0.0, ge=0)
    output_per_1m: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=8192, gt=0)
    reasoning: bool = False

    def resolved_api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The literal `api_key` if set, else the value of `api_key_env` in `env` (default: the
        environment the settings were loaded from, else os.environ)."""
        return _secret(self.api_key) or _from_env(self._env(env), self.api_key_env)


class AgentConfig(_Section):
    model: str = "main"
    fallbacks: list[str] = Field(default_factory=list)
    max_tool_rounds: int = Field(default=15, ge=1)
    stream_idle_timeout: float = Field(default=60.0, gt=0)
    # On SIGTERM, running turns get this long to reach their next durable step (a stored model
    # answer or tool result); what is still running then is resumed after the restart.
    shutdown_grace_s: float = Field(default=20.0, ge=0)
    tool_result_spill_chars: int = Field(default=8000, ge=500)
    system_prompt: str | None = None
    language: str = "auto"
    # how long an approval card waits for a decision; unanswered means denied (questions keep their own)
    approval_ttl_minutes: int = Field(default=30, ge=1, le=7 * 24 * 60)
    # how long an "Always allow" (a standing approval) lasts: at most 24 hours, shorter allowed
    standing_approval_hours: float = Field(default=24.0, gt=0, le=24)


class TelegramConfig(_Section):
    # None = "on when a token is available"; the loader resolves it to a bool.
    enabled: bool | None = None
    token_env: str = "TELEGRAM_BOT_TOKEN"
    token: SecretStr | None = None
    api_base_url: str = "https://api.telegram.org/bot"
    allowed_users: list[int] = Field(default_factory=list)
    admins: list[int] = Field(default_factory=list)
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, gt=0, lt=65536)
    webhook_secret_env: str | None = "TELEGRAM_WEBHOOK_SECRET"
    webhook_secret: SecretStr | None = None
    group_sessions: Literal["per_group", "per_user"] = "per_group"
    # updates older than this after downtime are not run (the chat is told); also the age limit
    # for messages received before a restart and not yet answered
    max_backlog_age_s: int = Field(default=600, ge=0)
    pairing: bool = False
    # replicas on one database: the poller lease and the webhook announcement last this long
    # unrenewed (renewed every third of it), so a standby takes over within about this time
    replica_lease_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> TelegramConfig:
        if self.mode == "webhook" and not self.webhook_url:
            raise ValueError("mode = 'webhook' needs webhook_url (the public https URL Telegram posts to)")
        return self

    def resolved_token(self, env: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.token) or _from_env(self._env(env), self.token_env)

    def resolved_webhook_secret(self, env: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.webhook_secret) or _from_env(self._env(env), self.webhook_secret_env)


class DiscordConfig(_Section):
    enabled: bool | None = None  # None = "on when a token is available"
    token_env: str = "DISCORD_BOT_TOKEN"
    token: SecretStr | None = None
    allowed_users: list[int] = Field(default_factory=list)
    admins: list[int] = Field(default_factory=list)
    # Discord reached elsewhere (a test fake, a relay): https:// and wss:// addresses whose TLS
    # certificate is valid for discord.com / gateway.discord.gg (adapters/discord.py connector_to)
    api_base_url: str | None = None
    gateway_url: str | None = None
    guild_ids: list[int] = Field(default_factory=list)
    # The privileged intent must also be switched on in the Discord developer portal; without it
    # DMs, mentions and slash commands still work.
    message_content_intent: bool = False
    group_sessions: Literal["per_group", "per_user"] = "per_group"
    # messages received before a restart and not yet answered are taken up again unless older
    max_backlog_age_s: int = Field(default=600, ge=0)
    pairing: bool = False  # print a one-time code at start; `/pair <code>` in a DM allows that user

    def resolved_token(self, env: Mapping[str, str] | None = None) -> str | None:
        return _secret(self.token) or _from_env(self._env(env), self.token_env)


class ToolsConfig(_Section):
    exec_timeout: float = Field(default=30.0, gt=0)
    exec_output_cap: int = Field(default=16000, gt=0)
    env_allowlist: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TERM"])
    web_fetch_max_bytes: int = Field(default=2_000_000, gt=0)
    web_fetch_timeout: float = Field(default=20.0, gt=0)
    allow_private_urls: bool = False
    # exec_command's sandbox (bubblewrap). Without one, commands are refused unless this is set.
    unsandboxed_exec: bool = False
    exec_network: bool = False
    exec_memory_mb: int = Field(default=4096, gt=0)
    exec_file_size_mb: int = Field(default=1024, gt=0)
    exec_max_processes: int = Field(default=256, ge=8)
    exec_disk_mb: int = Field(default=512, gt=0)
    exec_read_only_paths: list[Path] = Field(default_factory=list)


class MarketsConfig(_Section):
    provider: Literal["bundled", "csv", "akshare", "yfinance", "ccxt"] = "bundled"
    csv_dir: Path | None = None
    live: bool = False  # live trading through ccxt; paper trading unless the operator sets this
    live_exchange: str = "binance"
    live_api_key_env: str = "EXCHANGE_API_KEY"
    live_secret_env: str = "EXCHANGE_API_SECRET"
    initial_cash: float = Field(default=1_000_000, gt=0)
    retry_blocked: bool = True  # a paper order blocked by a price limit waits for the next bar's open
    # seconds between live-price checks of the price alerts in trading hours (a live provider only; 0: off)
    alert_poll_s: float = Field(default=60, ge=0)

    @model_validator(mode="after")
    def _poll_not_hammering(self) -> MarketsConfig:
        if 0 < self.alert_poll_s < 10:
            raise ValueError("alert_poll_s is 0 (off) or at least 10 seconds (providers rate-limit)")
        return self

    @model_validator(mode="after")
    def _csv_needs_dir(self) -> MarketsConfig:
        if self.provider == "csv" and self.csv_dir is None:
            raise ValueError("provider = 'csv' needs csv_dir (a folder of <code>.csv daily bars)")
        return self


class SchedulerConfig(_Section):
    enabled: bool = True
    timezone: str = "Asia/Shanghai"
    misfire_grace_s: int = Field(default=3600, ge=0)
    lease_ttl_s: int = Field(default=60, gt=0)
    # Per-turn trace folders ($TAPEBOT_HOME/traces/<day>) older than this are deleted by the daily upkeep.
    trace_retention_days: int = Field(default=14, ge=1)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone '{value}' (use an IANA name such as 'Asia/Shanghai')"
            ) from None
        return value


class MemoryConfig(_Section):
    enabled: bool = True
    recall_budget_chars: int = Field(default=1200, ge=0)
    # A model id for memory upkeep (extraction, de-duplication, TaskState, compaction summaries);
    # a cheaper model is fine. Default: the agent's model.
    model: str | None = None
    # At a stop, upkeep still running (extraction, TaskState) is waited for this long, then cancelled.
    upkeep_drain_s: float = Field(default=10.0, ge=0)


class McpServerConfig(_Section):
    name: str = Field(min_length=1)
    command: list[str] | None = None  # stdio server: argv
    url: str | None = None  # streamable-HTTP server
    # HTTP headers sent to a URL server: plain values in `headers`; secret ones by the name of the
    # environment variable holding them (`headers_env`), and `bearer_token_env` for
    # "Authorization: Bearer <token>". Secret values are masked in logs like every other key.
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None
    env_allowlist: list[str] = Field(default_factory=list)
    requires_approval: bool = True
    tool_overrides: dict[str, bool] = Field(default_factory=dict)  # tool -> requires_approval
    timeout: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("set exactly one of command (a stdio server) or url (an HTTP server)")
        if self.command and (self.headers or self.headers_env or self.bearer_token_env):
            raise ValueError("headers, headers_env and bearer_token_env are for url servers only")
        return self

    def resolved_headers(self, env: Mapping[str, str]) -> dict[str, str]:
        """The headers to send, secret ones read from the environment now; a variable that is
        not set is left out (the server's 401 then says what is missing)."""
        out = dict(self.headers)
        for header, var in self.headers_env.items():
            if env.get(var):
                out[header] = env[var]
        if self.bearer_token_env and env.get(self.bearer_token_env):
            out["Authorization"] = f"Bearer {env[self.bearer_token_env]}"
        return out

    def secret_values(self, env: Mapping[str, str]) -> list[str]:
        names = [*self.headers_env.values(), *([self.bearer_token_env] if self.bearer_token_env else [])]
        return [env[n] for n in names if env.get(n)]


class LogConfig(_Section):
    # A file to log to as well as stderr (relative paths are under home); rotated at max_bytes,
    # keeping `backups` old files. `tapebot --log-file PATH` overrides it for one run.
    file: Path | None = None
    max_bytes: int = Field(default=10_000_000, ge=10_000)
    backups: int = Field(default=5, ge=0)


def default_home(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = env.get("TAPEBOT_HOME") or "~/.tapebot"
    return Path(raw).expanduser().absolute()


class Settings(BaseModel):
    """The whole configuration. Build it with `config.loader.load_settings()`, which reads the file,
    applies `TAPEBOT_*` overrides (parsed by pydantic-settings' env source) and checks
    cross-references; `Settings()` alone is the built-in defaults. A plain model, not a
    pydantic-settings `BaseSettings`, so that building one never reads the process's environment:
    `load_settings` reads the mapping it is given (config/loader.py `_settings_from_env`); the
    config is the one `BaseSettings` gave (defaults validated, arbitrary types allowed)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, validate_default=True, arbitrary_types_allowed=True
    )

    home: Path = Field(default_factory=default_home)
    database_url: str | None = None
    # replicas on one PostgreSQL database: a replica that stops renewing its chats' leases this
    # long (a crash, a kill -9) is taken for dead, and a survivor takes its chats over
    chat_lease_s: float = Field(default=15.0, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    models: list[ModelConfig] = Field(default_factory=list)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    markets: MarketsConfig = Field(default_factory=MarketsConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)

    # The environment the settings were loaded from: secrets named by `*_env` resolve against it.
    _environ: Mapping[str, str] | None = PrivateAttr(default=None)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return Path(value).expanduser().absolute()

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    # ---- environment -------------------------------------------------------------------------
    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def bind_environ(self, environ: Mapping[str, str]) -> Settings:
        """Resolve every `*_env` secret against `environ` from now on (the loader calls this)."""
        env = dict(environ)
        self._environ = env
        for section in (*self.models, self.telegram, self.discord):
            section._environ = env
        return self

    # ---- paths -------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.home / "config.toml"

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.home / 'tapebot.db'}"

    @property
    def log_file(self) -> Path | None:
        if self.log.file is None:
            return None
        path = Path(self.log.file).expanduser()
        return path if path.is_absolute() else self.home / path

    @property
    def traces_dir(self) -> Path:
        return self.home / "traces"

    @property
    def results_dir(self) -> Path:
        return self.home / "results"

    @property
    def workspace_dir(self) -> Path:
        return self.home / "workspace"

    @property
    def archive_dir(self) -> Path:
        return self.home / "archive"

    @property
    def skills_dir(self) -> Path:
        return self.home / "skills"

    def ensure_dirs(self) -> None:
        """Create the home and its folders, 0700 (existing modes are left alone and reported
        by `loose_modes`)."""
        from config.filemodes import make_private_dir

        make_private_dir(self.home)
        for path in (
            self.traces_dir,
            self.results_dir,
            self.workspace_dir,
            self.archive_dir,
            self.skills_dir,
        ):
            make_private_dir(path)

    # ---- models ------------------------------------------------------------------------------
    def model(self, model_id: str) -> ModelConfig:
        for m in self.models:
            if m.id == model_id:
                return m
        declared = ", ".join(m.id for m in self.models) or "none"
        raise ConfigError(
            f"no model '{model_id}' (declared: {declared})",
            fix=f'add a [[models]] entry with id = "{model_id}" to {self.config_path}',
        )

    def model_chain(self) -> list[ModelConfig]:
        """The agent's model followed by its fallbacks, in order."""
        return [self.model(self.agent.model), *(self.model(f) for f in self.agent.fallbacks)]

    def api_key(self, model_id: str) -> str | None:
        return self.model(model_id).resolved_api_key(self.environ)

    # ---- secrets -----------------------------------------------------------------------------
    def secret_values(self) -> list[str]:
        """Every resolved secret string (longest first), for redaction of logs and traces."""
        env = self.environ
        found = [m.resolved_api_key(env) for m in self.models]
        found += [
            self.telegram.resolved_token(env),
            self.telegram.resolved_webhook_secret(env),
            self.discord.resolved_token(env),
            # exchange keys are masked whenever they are set, live trading on or not
            env.get(self.markets.live_api_key_env),
            env.get(self.markets.live_secret_env),
            _url_password(self.database_url),
        ]
        for server in self.mcp_servers:
            found += server.secret_values(env)
        # Very short values would redact ordinary words; no real secret is that short.
        unique = {s for s in found if s and len(s) >= 6}
        return sorted(unique, key=lambda s: (-len(s), s))


def _url_password(url: str | None) -> str | None:
    if not url or "://" not in url:
        return None
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).password
    except ValueError:
        return None
