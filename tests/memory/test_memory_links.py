"""Identity links (memory/links.py) on a real SQLite file with an injected clock: a code works once,
within its ten minutes, for another identity; wrong codes are counted and a guesser is stopped;
leaving gives back the right book; the memory scope follows the link except in a group."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.errors import LinkCodeExpired, LinkCodeInvalid, LinkNotAllowed, LinkRateLimited, NotLinked
from memory.db import Database
from memory.hooks import session_scope_resolver
from memory.links import (
    CODE_ALPHABET,
    CODE_LENGTH,
    CODE_TTL,
    FAILURE_WINDOW,
    MAX_FAILURES,
    Identity,
    LinkStore,
    code_hash,
    normalize_code,
)

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TG = Identity("telegram", "111", "Alice")
DC = Identity("discord", "42", "alice#1")
TERM = Identity("terminal", "terminal")


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """One migrated database, copied for each example (migrating each time is the slow part)."""
    path = tmp_path_factory.mktemp("links") / "template.db"

    async def make() -> None:
        async with Database(f"sqlite+aiosqlite:///{path}"):
            pass

    asyncio.run(make())
    return path


def run(template: Path, tmp: Path, scenario) -> None:
    db_file = tmp / f"links-{id(scenario)}-{datetime.now(UTC).timestamp()}.db"
    shutil.copy(template, db_file)

    async def go() -> None:
        clock = Clock()
        async with Database(f"sqlite+aiosqlite:///{db_file}") as db:
            await scenario(LinkStore(db, clock=clock), clock, db)

    try:
        asyncio.run(go())
    finally:
        db_file.unlink(missing_ok=True)


def test_a_code_links_two_identities_once_and_the_issuer_keeps_its_book(template, tmp_path):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        code, until = await links.issue(TG)
        assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET)
        assert until == T0 + CODE_TTL
        offer = await links.peek(code.lower(), DC)  # case does not matter; peeking does not use it
        assert (offer.identity, offer.name) == ("telegram:111", "Alice")
        assert await links.account_of(DC.key) == ""
        assert await links.redeem(code, DC) == "111"  # Telegram's own book is the account's
        assert await links.account_of(DC.key) == await links.account_of(TG.key) == "111"
        assert [m.identity for m in await links.members(TG.key)] == ["discord:42"]
        with pytest.raises(LinkCodeInvalid):  # used up
            await links.redeem(code, TERM)
        # a third identity joins through either member's code
        code2, _ = await links.issue(DC)
        await links.redeem(code2, TERM)
        assert await links.account_of(TERM.key) == "111"
        assert {m.identity for m in await links.members(TG.key)} == {"discord:42", "terminal:terminal"}

    run(template, tmp_path, scenario)


def test_leaving_gives_back_the_book_from_before_or_a_fresh_one(template, tmp_path):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        code, _ = await links.issue(TG)
        await links.redeem(code, DC)
        code, _ = await links.issue(TG)
        await links.redeem(code, TERM)
        await links.unlink(DC.key)  # joined: back to its own book ("42")
        assert await links.account_of(DC.key) == ""
        assert await links.account_of(TERM.key) == "111"
        await links.unlink(TG.key)  # the shared book began as Telegram's: the terminal keeps it
        assert await links.account_of(TERM.key) == "111"
        assert await links.account_of(TG.key) == "telegram:111"  # a fresh book
        assert await links.members(TG.key) == []
        with pytest.raises(NotLinked):
            await links.unlink(TG.key)
        with pytest.raises(NotLinked):
            await links.unlink(DC.key)

    run(template, tmp_path, scenario)


def test_codes_expire_are_replaced_and_never_link_an_identity_with_itself(template, tmp_path):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        old, _ = await links.issue(TG)
        new, _ = await links.issue(TG)
        with pytest.raises(LinkCodeInvalid):  # the newer code replaced it
            await links.peek(old, DC)
        with pytest.raises(LinkNotAllowed) as refused:
            await links.peek(new, TG)
        assert refused.value.reason == "self"
        clock.at = T0 + CODE_TTL
        with pytest.raises(LinkCodeExpired):
            await links.redeem(new, DC)
        assert await links.account_of(DC.key) == ""
        # already linked elsewhere: /unlink first
        code, _ = await links.issue(TG)
        await links.redeem(code, DC)
        other = Identity("telegram", "222", "Bob")
        code, _ = await links.issue(other)
        await links.redeem(code, Identity("discord", "77"))
        code, _ = await links.issue(other)
        with pytest.raises(LinkNotAllowed) as refused:
            await links.peek(code, DC)
        assert refused.value.reason == "other_account"
        code, _ = await links.issue(TG)
        with pytest.raises(LinkNotAllowed) as refused:
            await links.peek(code, DC)
        assert refused.value.reason == "already"

    run(template, tmp_path, scenario)


def test_only_the_hash_of_a_code_is_stored(template, tmp_path):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        code, _ = await links.issue(TG)
        path = db.url.split("///", 1)[1]
        raw = Path(path).read_bytes() + (
            Path(path + "-wal").read_bytes() if Path(path + "-wal").exists() else b""
        )
        assert code.encode() not in raw
        assert code_hash(code).encode() in raw

    run(template, tmp_path, scenario)


def test_the_memory_scope_follows_the_link_but_never_in_a_group(template, tmp_path):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        from memory.chat_tables import ChatRecord
        from memory.stores import SqlStore

        store = SqlStore(db)
        await store.get_or_create_session("dm", chat_key="discord:300", user_id="42")
        await store.get_or_create_session("grp", chat_key="discord:700", user_id="42")
        await store.save_chat(ChatRecord("discord:700", "discord", "700", None, True, "grp"))
        scope_of = session_scope_resolver(db)
        assert await scope_of("dm") == "42"
        code, _ = await links.issue(TG)
        await links.redeem(code, DC)
        assert await scope_of("dm") == "111"  # read again, not cached: the link applies at once
        assert await scope_of("grp") == "42"  # a group's memories never become the account's
        await links.unlink(DC.key)
        assert await scope_of("dm") == "42"

    run(template, tmp_path, scenario)


# ---- properties ------------------------------------------------------------------------------------
codes = st.text(alphabet=CODE_ALPHABET + "abcxyz019-_ ", min_size=0, max_size=12)
PROPERTY = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(
    use_code=st.booleans(),
    noise=codes,
    lower=st.booleans(),
    minutes=st.integers(min_value=0, max_value=30),
)
def test_property_only_the_issued_code_within_its_time_links_and_only_once(
    template, tmp_path, use_code, noise, lower, minutes
):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        code, _ = await links.issue(TG)
        typed = f"{code[:4]}-{code[4:]}" if use_code else noise  # as a person might type it
        guess = typed.lower() if lower else typed
        clock.at = T0 + timedelta(minutes=minutes)
        right = normalize_code(guess) == code
        try:
            account = await links.redeem(guess, DC)
        except LinkCodeExpired:
            assert right and minutes >= 10
        except LinkCodeInvalid:
            assert not right
        else:
            assert right and minutes < 10 and account == "111"
            with pytest.raises(LinkCodeInvalid):  # one use
                await links.redeem(guess, TERM)
        linked = await links.account_of(DC.key) == "111"
        assert linked == (right and minutes < 10)

    run(template, tmp_path, scenario)


@PROPERTY
@given(
    wrong=st.integers(min_value=0, max_value=MAX_FAILURES + 3),
    wait_minutes=st.integers(min_value=0, max_value=15),
)
def test_property_a_guesser_is_stopped_after_a_few_wrong_codes_even_with_the_right_one(
    template, tmp_path, wrong, wait_minutes
):
    async def scenario(links: LinkStore, clock: Clock, db: Database) -> None:
        code, _ = await links.issue(TG)
        for i in range(wrong):
            with pytest.raises((LinkCodeInvalid, LinkRateLimited)):
                await links.peek("WRONG" + CODE_ALPHABET[i % len(CODE_ALPHABET)] * 3, DC)
        clock.at = T0 + timedelta(minutes=wait_minutes)
        blocked = wrong >= MAX_FAILURES and timedelta(minutes=wait_minutes) < FAILURE_WINDOW
        if wait_minutes >= 10:  # the code itself ran out meanwhile
            code, _ = await links.issue(TG)
        try:
            await links.redeem(code, DC)
        except LinkRateLimited as exc:
            assert blocked and 0 < exc.retry_after <= FAILURE_WINDOW.total_seconds()
            assert await links.account_of(DC.key) == ""
        else:
            assert not blocked
            assert await links.account_of(DC.key) == "111"
        # another identity is not held back by this one's failures
        code, _ = await links.issue(Identity("telegram", "555"))
        await links.redeem(code, Identity("discord", "99"))

    run(template, tmp_path, scenario)


def test_property_guessing_within_the_limit_finds_no_code():
    """Five guesses in 31⁸ (≈ 8.5 × 10¹¹) codes: the chance a guesser links is below 10⁻¹¹."""
    assert MAX_FAILURES / len(CODE_ALPHABET) ** CODE_LENGTH < 1e-11
