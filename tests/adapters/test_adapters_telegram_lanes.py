"""Telegram polling with per-chat lanes: a slow handler holds up its own chat and the confirmation
offset, never the other chats."""

from __future__ import annotations

import asyncio


async def test_a_slow_handler_does_not_hold_up_other_chats(make_tg, tg_api, recorder):
    gate = asyncio.Event()

    async def on(ev):
        if ev.text == "slow":
            await gate.wait()

    recorder.on = on
    await make_tg(recorder, repoll_s=0.02, handler_timeout=30)
    slow_id = tg_api.push_text(5, "slow")
    tg_api.push_text(5, "after slow")  # same chat: waits its turn
    await tg_api.wait_for(lambda: [e.text for e in recorder.events] == ["slow"])
    other_id = tg_api.push_text(6, "other chat")
    await tg_api.wait_for(lambda: [e.text for e in recorder.events] == ["slow", "other chat"])
    # handled, but not confirmed: the prefix before it is still running
    assert tg_api.confirmed_offset <= slow_id
    assert other_id in [u["update_id"] for u in tg_api.updates]
    gate.set()
    await tg_api.wait_for(lambda: [e.text for e in recorder.events][-1] == "after slow")
    assert [e.text for e in recorder.events] == ["slow", "other chat", "after slow"]
    await tg_api.wait_for(lambda: not tg_api.updates)  # everything confirmed, each update once
    assert len(recorder.events) == 3


async def test_stop_confirms_only_the_contiguous_handled_prefix(make_tg, tg_api, recorder):
    gate = asyncio.Event()

    async def on(ev):
        if ev.text == "slow":
            await gate.wait()

    recorder.on = on
    ad = await make_tg(recorder, repoll_s=0.02, stop_grace_s=0.05, handler_timeout=30)
    first = tg_api.push_text(5, "first")
    await tg_api.wait_for(lambda: recorder.events)
    slow_id = tg_api.push_text(5, "slow")
    later_id = tg_api.push_text(6, "later, other chat")
    await tg_api.wait_for(lambda: len(recorder.events) == 3)
    await ad.stop()
    gate.set()
    assert first < tg_api.confirmed_offset <= slow_id
    # the handled "later" update sits behind the unfinished one: redelivered (the gateway's
    # durable de-duplication drops it), never lost
    assert [u["update_id"] for u in tg_api.updates] == [slow_id, later_id]
