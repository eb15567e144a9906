"""A link chooses a book, never rights: whatever identities are linked, who is allowed, who is an
admin and who may approve stay decided per platform identity, and the turn's requester keeps its own
platform id and approvers (only its account changes, and never in a group)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.base import ChatRef, UserRef
from agent.approval import Requester
from agent.errors import LinkError
from agent.ports import AccountDirectory
from agent.runtime import AgentRuntime
from agent.tools.registry import Deps
from bot.access import Access, PlatformAccess
from bot.chats import group_account
from memory.db import Database
from memory.links import Identity, LinkStore

PLATFORMS = ("telegram", "discord", "terminal")
IDS = ("1", "2", "3", "42")
identities = st.tuples(st.sampled_from(PLATFORMS), st.sampled_from(IDS))


class _NoPairing:
    async def paired_users(self, platform: str) -> list[str]:
        return []

    async def add_paired_user(self, platform: str, user_id: str) -> None:
        return None


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("noadmin") / "template.db"

    async def make() -> None:
        async with Database(f"sqlite+aiosqlite:///{path}"):
            pass

    asyncio.run(make())
    return path


def decisions(access: Access) -> dict:
    out = {}
    for platform in PLATFORMS:
        for uid in IDS:
            user = UserRef(platform, uid)
            for chat in (ChatRef(platform, uid), ChatRef(platform, "-100", is_group=True)):
                out[(platform, uid, chat.is_group)] = (
                    access.allowed(user),
                    access.is_admin(chat, user),
                    access.approvers_for(chat, user),
                )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    allowed=st.dictionaries(st.sampled_from(PLATFORMS), st.frozensets(st.sampled_from(IDS))),
    admins=st.dictionaries(st.sampled_from(PLATFORMS), st.frozensets(st.sampled_from(IDS))),
    pairs=st.lists(st.tuples(identities, identities), max_size=6),
    who=identities,
    group=st.booleans(),
)
def test_property_links_never_change_access_or_who_may_approve(
    template, tmp_path, allowed, admins, pairs, who, group
):
    db_file = tmp_path / f"l{abs(hash((tuple(pairs), who, group)))}.db"
    shutil.copy(template, db_file)

    async def go() -> None:
        platforms = {
            p: PlatformAccess(set(allowed.get(p, ())), set(admins.get(p, ())) & set(allowed.get(p, ())))
            for p in PLATFORMS
        }
        access = Access(platforms, _NoPairing())
        before = decisions(access)
        async with Database(f"sqlite+aiosqlite:///{db_file}") as db:
            links = LinkStore(db)
            for (p1, u1), (p2, u2) in pairs:
                if (p1, u1) == (p2, u2):
                    continue
                code, _ = await links.issue(Identity(p1, u1))
                try:
                    await links.redeem(code, Identity(p2, u2))
                except LinkError:  # already linked elsewhere: refused, as it should be
                    pass
            assert decisions(access) == before

            platform, uid = who
            chat = ChatRef(platform, "-100", is_group=True) if group else ChatRef(platform, uid)
            user = UserRef(platform, uid)
            asked = Requester(uid, chat.key, access.approvers_for(chat, user), account=group_account(chat))
            runtime = SimpleNamespace(deps=Deps())
            runtime.deps.add(links, as_type=AccountDirectory)
            got = await AgentRuntime._with_account(runtime, asked)  # type: ignore[arg-type]
            assert (got.user_id, got.chat_key, got.approvers, got.unattended) == (
                asked.user_id,
                asked.chat_key,
                asked.approvers,
                asked.unattended,
            )
            if group:
                assert got.account == asked.account == f"group:{chat.key}"
            else:
                assert got.account == await links.account_of(f"{platform}:{uid}")

    try:
        asyncio.run(go())
    finally:
        db_file.unlink(missing_ok=True)
