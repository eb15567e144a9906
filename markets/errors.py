"""Market errors. They derive from the runtime's ToolFailed so a tool that raises one shows the model
a clear message (e.g. "not found, did you mean …") instead of a stack trace."""

from __future__ import annotations

from typing import Any

from agent.errors import ToolFailed


class MarketError(ToolFailed):
    """Base of errors raised by markets/."""


class NotFound(MarketError):
    """An unknown code, name or symbol. `suggestions` are close matches for "did you mean …"."""

    def __init__(
        self,
        query: str,
        suggestions: list[str] | None = None,
        what: str = "instrument",
        ambiguous: bool = False,
    ):
        self.query = query
        self.suggestions = list(suggestions or [])
        self.ambiguous = ambiguous
        text = f"{query!r} matches several {what}s" if ambiguous else f"{what} not found: {query!r}"
        if self.suggestions:
            text += "; did you mean " + ", ".join(self.suggestions) + "?"
        super().__init__(text)


class OrderNotFound(MarketError):
    """No order with that id belongs to this user on this account."""


class WrongExchange(NotFound):
    """A code with the wrong exchange (`600519.SZ`): the code exists, but on another exchange."""

    def __init__(self, query: str, given: str, right: str, label: str):
        super().__init__(query, [f"{label} = {right}"])
        self.right = right
        self.args = (f"{query!r}: {label} is listed on {right.split('.')[-1]}, not {given}; use {right}",)


class NoData(MarketError):
    """The instrument exists but has no bars in the requested window / from this provider."""


class NoMinuteData(NoData):
    """No minute bars for this instrument/day from the configured providers (defined here, not in
    markets.minute, so the tools can catch it without importing numpy)."""


class ProviderUnavailable(MarketError):
    """An optional backend's library is not installed (install the extra) or the backend failed."""


class ServiceMissing(MarketError):
    """A tool needs a service the composition root did not configure."""


class TradeRejected(MarketError):
    """The broker refused an order (insufficient cash/shares, lot size, T+1, limit-locked bar, ...)."""


class IdempotencyConflict(MarketError):
    """An idempotency key already used for a different order: never replayed as if it were this one."""

    def __init__(self, key: str, first: dict[str, Any]):
        self.key, self.first = key, first
        super().__init__(
            f"idempotency key {key!r} was already used for a different order: trade #{first['id']}, "
            f"{first['side']} {first['quantity']:g} {first['symbol']} ({first['status']}). "
            "Nothing was traded now; use a new key for a new order."
        )
