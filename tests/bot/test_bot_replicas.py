"""Two `tapebot run` replicas on one PostgreSQL database behind a round-robin webhook behave as one
bot (tests/bot/replica_cluster.py; bench/replicas.py runs the same at 200 chats and 1-3 replicas).
Skipped without TAPEBOT_TEST_POSTGRES_URL."""

from __future__ import annotations

import pytest

from tests.bot.replica_cluster import Cluster, converse, report
from tests.pg import PG_URL

pytestmark = pytest.mark.skipif(not PG_URL, reason="no PostgreSQL server (set TAPEBOT_TEST_POSTGRES_URL)")


def _chats_of(cluster: Cluster, marks: list[str]) -> dict[str, list[str]]:
    """What the chats of these marks ("c<chat>m<n>") were sent, for the failure's message."""
    chats = {int(m[1:].split("m")[0]) for m in marks}
    return {str(c): cluster.api.texts(c) for c in chats}


async def test_two_replicas_and_a_kill_9_answer_every_message_once_in_order(tmp_path):
    """Messages of one chat land on both replicas; one replica is killed -9 mid-run and restarted:
    every message is answered, none twice, each chat's in the order sent; a card's button tapped
    on both replicas runs its tool once."""
    async with Cluster(tmp_path, PG_URL, 2, chats=16, model_delay=0.1, lease_s=2.0) as cluster:
        outcome = await converse(cluster, per_chat=5, gap=0.2, kill_after=30, down_for=1.0, approvals=3)
        print(report("2 replicas", outcome))
        # every message answered — one whose answer the kill cut off between its store and its
        # send as well (a survivor or the restart sends it)
        assert outcome.lost == [], report("lost", outcome)
        assert outcome.unsent == [], report("unsent", outcome)
        # at least once: an answer Telegram took in the last milliseconds before the kill, before
        # its replica could record that it was sent, is sent again rather than risk losing it
        assert len(outcome.twice) <= 2, (report("twice", outcome), _chats_of(cluster, outcome.twice))
        assert outcome.out_of_order == [], report("order", outcome)
        assert set(outcome.wrote) == {f"c{c}" for c in cluster.chat_ids[:3]}
        assert all(n == 1 for n in outcome.wrote.values()), outcome.wrote
        assert sorted(outcome.tool_runs.values()) == [1, 1, 1], outcome.tool_runs


async def test_a_replica_killed_and_not_restarted_has_its_chats_taken_over(tmp_path):
    """Replica 0 is killed -9 mid-run and stays down: the survivor takes its chats over once its
    leases expire — the turn it left running resumed, the messages it stored answered — with no
    restart: every message answered once, in order."""
    async with Cluster(tmp_path, PG_URL, 2, chats=16, model_delay=0.1, lease_s=2.0) as cluster:
        outcome = await converse(cluster, per_chat=5, gap=0.2, kill_after=30, down_for=None)
        print(report("2 replicas, one killed for good", outcome))
        assert outcome.lost == [], report("lost", outcome)
        assert outcome.unsent == [], report("unsent", outcome)
        # at least once: an answer Telegram took in the last milliseconds before the kill, before
        # its replica could record that it was sent, is sent again rather than risk losing it
        assert len(outcome.twice) <= 2, (report("twice", outcome), _chats_of(cluster, outcome.twice))
        assert outcome.out_of_order == [], report("order", outcome)
