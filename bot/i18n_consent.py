"""The words of approval cards, standing approvals and `/rules` (issue 15), merged into
bot/i18n.STRINGS. Kept apart so the consent wording lives in one place."""

from __future__ import annotations

CONSENT_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "approval_hint": "Reply yes or no (or tap a button); reply to this card to ask for changes.",
        "approved_always_by": "✅ Allowed by {who}, with a standing approval ({rule}) — see /rules",
        "card_trade": "{side} {quantity} × {name} · {label}",
        "card_price": "Last price {price} (close of {as_of})",
        "card_amount": "Estimated amount ≈ {amount} + fees ≈ {fees}",
        "card_cash": "Cash {cash} → {after} after",
        "card_no_price": "No price available for this instrument.",
        "card_who_dm": "Who may approve: you",
        "card_who_group": "Who may approve: an admin of this group",
        "card_expires": "Expires {at} UTC (in {minutes} min); unanswered means denied.",
        "card_always": "“Always allow” would cover: {scope}, for {hours} h. Revoke with /rules.",
        "card_no_always": "“Always allow” is not offered for this action.",
        "card_raw": "Raw arguments:",
        "buy": "BUY",
        "sell": "SELL",
        "approval_unclear": "That is not an answer to the card: reply yes or no, or tap a button.",
        "admin_only": "In a group only an admin can use /{name}.",
        "rules_none": "No standing approvals in this chat.",
        "rules_head": "Standing approvals in this chat (revoke: /rules revoke <id> | all):",
        "rules_line": "{id} · {tool} · {scope} · granted by {who} at {at} · expires {expires} UTC",
        "rules_revoked": "Revoked {n} standing approval(s).",
        "rules_unknown": "No standing approval {id} in this chat.",
        "rules_usage": "Usage: /rules · /rules revoke <id> · /rules revoke all",
        "rules_status": "Standing approvals: {n} (/rules)",
    },
    "zh": {
        "approval_hint": "回复“好”或“不”（或点按钮）；回复此卡片可要求修改。",
        "approved_always_by": "✅ 已由 {who} 批准，并设为长期允许（{rule}）——见 /rules",
        "card_trade": "{side} {quantity} × {name} · {label}",
        "card_price": "最新价 {price}（{as_of} 收盘）",
        "card_amount": "预计金额 ≈ {amount}，费用 ≈ {fees}",
        "card_cash": "现金 {cash} → 交易后 {after}",
        "card_no_price": "暂无该标的的价格。",
        "card_who_dm": "谁可以批准：你",
        "card_who_group": "谁可以批准：本群管理员",
        "card_expires": "{at} UTC 过期（{minutes} 分钟后）；未回复即视为拒绝。",
        "card_always": "“总是允许”将覆盖：{scope}，有效 {hours} 小时。可用 /rules 撤销。",
        "card_no_always": "此操作不提供“总是允许”。",
        "card_raw": "原始参数：",
        "buy": "买入",
        "sell": "卖出",
        "approval_unclear": "这不是对确认卡片的回答：请回复“好”或“不”，或点按钮。",
        "admin_only": "在群里只有管理员可以使用 /{name}。",
        "rules_none": "本对话没有长期允许规则。",
        "rules_head": "本对话的长期允许规则（撤销：/rules revoke <id> | all）：",
        "rules_line": "{id} · {tool} · {scope} · 由 {who} 于 {at} 授予 · {expires} UTC 过期",
        "rules_revoked": "已撤销 {n} 条长期允许规则。",
        "rules_unknown": "本对话没有长期允许规则 {id}。",
        "rules_usage": "用法：/rules · /rules revoke <id> · /rules revoke all",
        "rules_status": "长期允许规则：{n} 条（/rules）",
    },
}

CONSENT_COMMANDS: dict[str, dict[str, str]] = {
    "en": {"rules": "Standing approvals: list, revoke <id>, revoke all"},
    "zh": {"rules": "长期允许规则：列出、revoke <id>、revoke all"},
}
