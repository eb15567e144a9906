"""What a chat sees of /link and /unlink, in its language. Merged into bot/i18n.STRINGS."""

from __future__ import annotations

from agent.texts import Text

LINK_STRINGS: dict[str, Text] = {
    "link_off": Text(
        en="Linking accounts needs the database; it is not available here.",
        zh="关联账户需要数据库，这里不可用。",
    ),
    "link_group": Text(
        en="Groups keep their own book and cannot be linked. Send /link to me in a private chat.",
        zh="群组使用自己的账本，不能关联。请在与我的私聊中发送 /link。",
    ),
    "link_code": Text(
        en="Your link code: {code} (valid until {until} UTC, once).\nIn the other chat — Telegram, Discord or the terminal — send /link {code} (terminal: tapebot link {code}). Linked chats share one paper book, portfolio, memory, standing approvals and alerts; each keeps its own conversation.",
        zh="你的关联码：{code}（一次有效，{until} UTC 前）。\n在另一个对话（Telegram、Discord 或终端）中发送 /link {code}（终端：tapebot link {code}）。关联后共用一个模拟账本、持仓、记忆、长期允许规则和提醒；各对话保留自己的对话记录。",
    ),
    "link_members": Text(
        en="Linked with: {names}. /unlink to leave.",
        zh="已关联：{names}。发送 /unlink 解除。",
    ),
    "link_none": Text(
        en="This identity is not linked to any other.",
        zh="此身份尚未与其他身份关联。",
    ),
    "link_preview": Text(
        en="This links {me} with {other}: both will use one paper book, portfolio, memory, standing approvals and alerts (the book of {other}); each chat keeps its own conversation. Admin rights and allow-lists stay per platform.\nTo confirm, send /link {code} yes",
        zh="这将把 {me} 与 {other} 关联：双方共用一个模拟账本、持仓、记忆、长期允许规则和提醒（使用 {other} 的账本）；各对话保留自己的对话记录。管理员权限和允许名单仍按平台分别决定。\n确认请发送 /link {code} yes",
    ),
    "link_done": Text(
        en="✅ Linked with {other}. This chat now uses the shared book, portfolio, memory and alerts.",
        zh="✅ 已与 {other} 关联。此对话现在使用共享的账本、持仓、记忆和提醒。",
    ),
    "link_invalid": Text(
        en="That link code is not valid (mistyped, already used, or replaced by a newer one). Ask for a new one with /link in the other chat.",
        zh="该关联码无效（输错、已使用或已被更新的关联码取代）。请在另一个对话中发送 /link 获取新码。",
    ),
    "link_expired": Text(
        en="That link code has expired. Send /link in the other chat for a new one.",
        zh="该关联码已过期。请在另一个对话中发送 /link 获取新码。",
    ),
    "link_rate_limited": Text(
        en="Too many wrong codes. Try again in {minutes} min.",
        zh="错误次数过多，请 {minutes} 分钟后再试。",
    ),
    "link_self": Text(
        en="That code was made in this identity: use it in another chat.",
        zh="这个关联码来自当前身份，请在另一个对话中使用。",
    ),
    "link_already": Text(
        en="These identities are already linked.",
        zh="这两个身份已经关联。",
    ),
    "link_other_account": Text(
        en="This identity is already linked to others. /unlink first, then link again.",
        zh="此身份已与其他身份关联。请先发送 /unlink，再重新关联。",
    ),
    "link_usage": Text(
        en="Usage: /link (your links and a new code) · /link <code> · /link <code> yes · /unlink",
        zh="用法：/link（查看关联并获取新码）· /link <关联码> · /link <关联码> yes · /unlink",
    ),
    "unlink_done": Text(
        en="Unlinked. The shared book stays with the other linked chats; this one goes back to its own book from before the link (or a fresh one if the shared book began here).",
        zh="已解除关联。共享账本留给其他已关联的对话；此身份回到关联前自己的账本（若共享账本原本就是它的，则使用新账本）。",
    ),
    "unlink_none": Text(
        en="This identity is not linked, so there is nothing to undo.",
        zh="此身份没有关联，无需解除。",
    ),
    "link_cancelled": Text(
        en="Not linked. To link, answer y, or run tapebot link <code> --yes.",
        zh="未关联。如需关联，请回答 y，或运行 tapebot link <关联码> --yes。",
    ),
    "identity_terminal": Text(
        en="the terminal",
        zh="终端",
    ),
    "identity_of": Text(
        en="{platform} {name}",
        zh="{platform} {name}",
    ),
}
