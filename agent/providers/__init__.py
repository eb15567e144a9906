"""Model providers behind the `ModelClient` port (see `base.py`).

`build_model_client` / `build_model_chain` turn model configs into clients. Vendor SDKs are
imported inside the client constructors, so importing this package stays cheap.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, Literal

from agent.providers.base import ModelClient, ModelInfo
from agent.providers.fallback import FallbackClient, SwitchCallback
from agent.providers.metadata import infer_context_window, infer_supports_reasoning

if TYPE_CHECKING:  # only for annotations: config.settings is not needed to import this package
    from config.settings import ModelConfig

__all__ = [
    "FallbackClient",
    "build_model_chain",
    "build_model_client",
    "infer_context_window",
    "infer_supports_reasoning",
    "model_info",
]


class _Unset(enum.Enum):
    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET  # "not given" for `api_key`, where None means "no key"


def model_info(cfg: ModelConfig) -> ModelInfo:
    """ModelInfo from a model config: configured context window, else inferred from the name."""
    return ModelInfo(
        id=cfg.id,
        model=cfg.model,
        provider=cfg.provider,
        context_window=getattr(cfg, "context_window", None) or infer_context_window(cfg.model),
        input_per_1m=float(getattr(cfg, "input_per_1m", 0.0) or 0.0),
        output_per_1m=float(getattr(cfg, "output_per_1m", 0.0) or 0.0),
        supports_reasoning=bool(getattr(cfg, "reasoning", False)) or infer_supports_reasoning(cfg.model),
    )


def _api_key(cfg: ModelConfig) -> str | None:
    # getattr: stand-ins with only some of ModelConfig's attributes are accepted (tests, benches)
    resolve = getattr(cfg, "resolved_api_key", None)
    if callable(resolve):
        resolved: str | None = resolve()
        return resolved
    key = getattr(cfg, "api_key", None)
    if key is not None and hasattr(key, "get_secret_value"):
        key = key.get_secret_value()
    return key or None


# Claude models before the 4.6 generation only know manual budgets; later ones only "adaptive".
_BUDGET_THINKING = re.compile(
    r"claude-3|claude-(?:sonnet|opus|haiku)-4(?:-[0-5])?(?:-\d{8})?$", re.IGNORECASE
)


def anthropic_thinking(model: str, max_tokens: int | None) -> Literal["adaptive"] | int:
    """The thinking setting `reasoning = true` means for an Anthropic model."""
    if _BUDGET_THINKING.search(model):
        return max(1024, (max_tokens or 8192) // 2)
    return "adaptive"


def build_model_client(
    cfg: ModelConfig, *, idle_timeout: float = 60.0, api_key: str | _Unset | None = _UNSET
) -> ModelClient:
    """One client for a model config (`config.ModelConfig` or anything with its attributes:
    id, provider, model, base_url, api_key, context_window, input_per_1m, output_per_1m,
    max_tokens, reasoning). `api_key` overrides the key resolved from `cfg`."""
    key = _api_key(cfg) if isinstance(api_key, _Unset) else api_key
    info = model_info(cfg)
    max_tokens = getattr(cfg, "max_tokens", None)
    base_url = getattr(cfg, "base_url", None)
    if cfg.provider == "anthropic":
        from agent.providers.anthropic import AnthropicClient

        thinking = anthropic_thinking(cfg.model, max_tokens) if getattr(cfg, "reasoning", False) else None
        return AnthropicClient(
            info, key, base_url, idle_timeout=idle_timeout, max_tokens=max_tokens, thinking=thinking
        )
    if cfg.provider == "openai":
        from agent.providers.openai import OpenAICompatClient

        return OpenAICompatClient(info, key, base_url, idle_timeout=idle_timeout, max_tokens=max_tokens)
    from agent.errors import ConfigError

    raise ConfigError(
        f"unknown provider '{cfg.provider}'",
        key=f"models.{cfg.id}.provider",
        fix="use 'anthropic' or 'openai'",
    )


# The vendor SDK each provider imports (lazily, in its client) — a cold import costs a second or
# more, which the first reply after `tapebot run` starts would otherwise pay.
SDK_MODULES = {"anthropic": "anthropic", "openai": "openai"}


def sdk_modules(cfgs: Sequence[ModelConfig]) -> list[str]:
    """The SDK modules the configured models need, each once, in order."""
    return list(dict.fromkeys(SDK_MODULES[c.provider] for c in cfgs if c.provider in SDK_MODULES))


def import_sdks(modules: Sequence[str]) -> None:
    """Import `modules` (in a worker thread at start); a failure is left for the client to report."""
    import importlib

    from agent.providers.sdkload import lazy_reexports

    for name in modules:
        try:
            lazy_reexports(name)
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 — the client that needs it raises a clear error later
            continue


def build_model_chain(
    cfgs: Sequence[ModelConfig],
    *,
    idle_timeout: float = 60.0,
    on_switch: SwitchCallback | None = None,
    retry_after_cap: float = 10.0,
) -> FallbackClient:
    """The primary model followed by its fallbacks (e.g. `settings.model_chain()`), wrapped in
    a FallbackClient (also for a single model: it owns the 429 retry)."""
    clients = [build_model_client(cfg, idle_timeout=idle_timeout) for cfg in cfgs]
    return FallbackClient(clients, on_switch=on_switch, retry_after_cap=retry_after_cap)
