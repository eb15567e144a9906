"""What a chat adapter asks of the other replicas of the bot (processes on the same database):
the port `ReplicaGate`, implemented in the bot over database leases (bot/replicas.py).

Telegram allows one reader of a bot's updates: either one getUpdates poller or a webhook. Replicas
in polling mode therefore take turns (one lease; a standby takes over when the holder stops
renewing), and a replica in polling mode must not switch off a webhook that other replicas
serve — deleteWebhook would silence them all."""

from __future__ import annotations

from typing import Protocol


class ReplicaGate(Protocol):
    #: seconds between renewals of what this replica holds or announces
    renew_interval: float

    async def webhook_deployment(self) -> str | None:
        """Who serves the webhook, while some replica announces it; None when none does."""
        ...

    async def take_poller(self) -> str | None:
        """Take or renew the poller lease: None when this replica holds it now, else the holder."""
        ...

    async def release_poller(self) -> None:
        """Give the poller lease up now, so a standby takes over at its next try."""
        ...

    async def announce_webhook(self) -> None:
        """Say that this replica serves the webhook (renewed every `renew_interval`)."""
        ...
