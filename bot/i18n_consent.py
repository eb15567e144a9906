"""The words of approval cards, standing approvals and `/rules`, merged into
bot/i18n.STRINGS. Kept apart so the consent wording lives in one place."""

from __future__ import annotations

from agent.texts import Text

CONSENT_STRINGS: dict[str, Text] = {
    "approval_hint": Text(
        en="Reply yes or no (or tap a button); reply to this card to ask for changes.",
        zh="回复“好”或“不”（或点按钮）；回复此卡片可要求修改。",
    ),
    "approved_always_by": Text(
        en="✅ Allowed by {who}, with a standing approval ({rule}) — see /rules",
        zh="✅ 已由 {who} 批准，并设为长期允许（{rule}）——见 /rules",
    ),
    "card_trade": Text(
        en="{side} {quantity} × {name} · {label}",
        zh="{side} {quantity} × {name} · {label}",
    ),
    "card_price": Text(
        en="Last price {price} (close of {as_of})",
        zh="最新价 {price}（{as_of} 收盘）",
    ),
    "card_will_not_fill": Text(
        en="⚠️ As things stand this order will not fill: {why}",
        zh="⚠️ 按目前情况，这笔订单不会成交：{why}",
    ),
    "card_amount": Text(
        en="Estimated amount ≈ {amount} + fees ≈ {fees}",
        zh="预计金额 ≈ {amount}，费用 ≈ {fees}",
    ),
    "card_cash": Text(
        en="Cash {cash} → {after} after",
        zh="现金 {cash} → 交易后 {after}",
    ),
    "card_no_price": Text(
        en="No price available for this instrument.",
        zh="暂无该标的的价格。",
    ),
    "card_who_dm": Text(
        en="Who may approve: you",
        zh="谁可以批准：你",
    ),
    "card_who_group": Text(
        en="Who may approve: an admin of this group",
        zh="谁可以批准：本群管理员",
    ),
    "standing_used": Text(
        en="✅ Ran under this chat's standing approval ({rule}) — revoke with /rules",
        zh="✅ 已按本聊天的长期允许执行（{rule}）——用 /rules 撤销",
    ),
    "held_until_decided": Text(
        en="⏳ Saved — I'll answer this once the approval above is decided.",
        zh="⏳ 已保存——上面的审批处理完后我再回复这条。",
    ),
    "held_until_answered": Text(
        en="⏳ Saved — I'll answer this once the question above is answered.",
        zh="⏳ 已保存——上面的问题得到回答后我再回复这条。",
    ),
    "card_expires": Text(
        en="Expires {at} {zone} (in {minutes} min); unanswered means denied.",
        zh="{at}（{zone}）过期（{minutes} 分钟后）；未回复即视为拒绝。",
    ),
    "card_cash_unchanged": Text(
        en="Cash {cash} — unchanged: this order will be rejected",
        zh="现金 {cash}——不变：此订单将被拒绝",
    ),
    "card_warn_t_plus_1": Text(
        en="⚠️ Will be rejected — T+1: {bought} bought in the {day} session can be sold from the next trading day; sellable now {sellable}",
        zh="⚠️ 将被拒绝——T+1：{day} 交易日买入的 {bought} 股下一个交易日才能卖出；当前可卖 {sellable}",
    ),
    "card_warn_holding": Text(
        en="⚠️ Will be rejected — not enough shares: holding {have}, sellable {sellable}",
        zh="⚠️ 将被拒绝——持仓不足：持有 {have}，可卖 {sellable}",
    ),
    "card_warn_lot_sell": Text(
        en="⚠️ Will be rejected — A-share sells are whole lots of {lot} unless the whole position is sold",
        zh="⚠️ 将被拒绝——A 股卖出须为 {lot} 股的整数倍（清仓除外）",
    ),
    "card_warn_lot_buy": Text(
        en="⚠️ Will be rejected — A-share buys are whole lots of {lot}; {quantity} is not",
        zh="⚠️ 将被拒绝——A 股买入须为 {lot} 股的整数倍，{quantity} 不是",
    ),
    "card_warn_cash": Text(
        en="⚠️ Will be rejected — not enough cash: needs {need}, have {have}",
        zh="⚠️ 将被拒绝——现金不足：需要 {need}，现有 {have}",
    ),
    "card_warn_quantity": Text(
        en="⚠️ Will be rejected — the quantity must be positive",
        zh="⚠️ 将被拒绝——数量必须为正数",
    ),
    "card_warn_limit": Text(
        en="⚠️ Will be rejected — the price is at {word}: no fill at the limit",
        zh="⚠️ 将被拒绝——价格处于{word}：涨跌停价不成交",
    ),
    "card_warn_limit_waits": Text(
        en="⚠️ The price is at {word}: it will not fill now; it waits and is retried at the next bar's open",
        zh="⚠️ 价格处于{word}：现在不会成交；订单将等待，在下一根 K 线开盘时重试",
    ),
    "card_decided_at": Text(
        en="{outcome} · {at}",
        zh="{outcome} · {at}",
    ),
    "approval_admin_only": Text(
        en="Only an admin of this group can approve or deny this card.",
        zh="只有本群管理员可以批准或拒绝这张卡片。",
    ),
    "approval_unknown_id": Text(
        en="There is no approval “{id}” waiting in this chat (check the id on its card).",
        zh="本对话没有等待中的确认“{id}”（请核对卡片上的 ID）。",
    ),
    "approval_decided_id": Text(
        en="Approval {id} was already decided.",
        zh="确认 {id} 已经处理过了。",
    ),
    "approval_expired_id": Text(
        en="Approval {id} has expired — nothing was executed.",
        zh="确认 {id} 已过期——未执行任何操作。",
    ),
    "card_always_group": Text(
        en="“Always allow” would cover: {scope}, for {hours} h — only when an admin of this group asks; other members' requests still need an admin's approval. Revoke with /rules.",
        zh="“总是允许”将覆盖：{scope}，有效 {hours} 小时——仅限本群管理员发起的请求；其他成员的请求仍需管理员批准。可用 /rules 撤销。",
    ),
    "limit-up": Text(
        en="limit-up",
        zh="涨停",
    ),
    "limit-down": Text(
        en="limit-down",
        zh="跌停",
    ),
    "card_always": Text(
        en="“Always allow” would cover: {scope}, for {hours} h. Revoke with /rules.",
        zh="“总是允许”将覆盖：{scope}，有效 {hours} 小时。可用 /rules 撤销。",
    ),
    "card_no_always": Text(
        en="“Always allow” is not offered for this action.",
        zh="此操作不提供“总是允许”。",
    ),
    "card_raw": Text(
        en="Raw arguments:",
        zh="原始参数：",
    ),
    "buy": Text(
        en="BUY",
        zh="买入",
    ),
    "sell": Text(
        en="SELL",
        zh="卖出",
    ),
    "approval_unclear": Text(
        en="That is not an answer to the card: reply yes or no, or tap a button.",
        zh="这不是对确认卡片的回答：请回复“好”或“不”，或点按钮。",
    ),
    "approval_unclear_typed": Text(
        en="not an answer: type yes or no",
        zh="这不是回答：请输入“好”或“不”",
    ),
    "approval_unclear_typed_always": Text(
        en="not an answer: type yes, always or no",
        zh="这不是回答：请输入“好”、“总是允许”或“不”",
    ),
    "approval_question": Text(
        en="That reads as a question, so nothing was approved: reply yes or no without a question mark, or tap a button.",
        zh="这是一个问题，所以没有批准：请不带问号回复“好”或“不”，或点按钮。",
    ),
    "approval_question_typed": Text(
        en="a question is not an answer, nothing was approved: type yes or no",
        zh="问题不是回答，没有批准：请输入“好”或“不”",
    ),
    "admin_only": Text(
        en="In a group only an admin can use /{name}.",
        zh="在群里只有管理员可以使用 /{name}。",
    ),
    "rules_none": Text(
        en="No standing approvals in this chat.",
        zh="本对话没有长期允许规则。",
    ),
    "rules_head": Text(
        en="Standing approvals in this chat (revoke: /rules revoke <id> | all):",
        zh="本对话的长期允许规则（撤销：/rules revoke <id> | all）：",
    ),
    "rules_line": Text(
        en="{id} · {tool} · {scope} · granted by {who} at {at} · expires {expires} UTC",
        zh="{id} · {tool} · {scope} · 由 {who} 于 {at} 授予 · {expires} UTC 过期",
    ),
    "rules_revoked": Text(
        en="Revoked {n} standing approval(s).",
        zh="已撤销 {n} 条长期允许规则。",
    ),
    "rules_unknown": Text(
        en="No standing approval {id} in this chat.",
        zh="本对话没有长期允许规则 {id}。",
    ),
    "rules_usage": Text(
        en="Usage: /rules · /rules revoke <id> · /rules revoke all",
        zh="用法：/rules · /rules revoke <id> · /rules revoke all",
    ),
    "rules_status": Text(
        en="Standing approvals: {n} (/rules)",
        zh="长期允许规则：{n} 条（/rules）",
    ),
}
