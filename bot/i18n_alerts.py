"""What a chat sees of alerts and market data dates, in its language. Merged into bot/i18n.STRINGS."""

from __future__ import annotations

ALERT_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "alert_fired": "🔔 Alert #{id}: {name} {symbol} — {condition}\nClose {close} on {day} ({observed}).\n{source}",
        "alert_fired_live": "🔔 Alert #{id}: {name} {symbol} — {condition}\nLive in the {day} session: "
        "{observed}. Daily bars to {prev}.\n{source}",
        "alert_fired_more": "🔔 {n} more alerts fired: {items}",
        "alert_fired_plain": "🔔 Alert #{id}: {symbol} — {condition} ({day}, {observed})",
        "alerts_off": "Alerts need the market tools and the database.",
        "alerts_none": 'No alerts are set. Ask me, e.g. "tell me when 600519 closes below 1400".',
        "alerts_head": "Alerts ({n}):",
        "alerts_watchlist": "Watchlist: {symbols}",
        "alerts_removed": "Alert #{id} removed: {condition}",
        "alerts_usage": "Usage: /alerts [list] | /alerts remove <id>",
        "alerts_error": "⚠️ {error}",
        "status_data": "Market data: {dates} · {source}",
        "data_line": "📅 Market data as of {dates}.",
        "data_stale": "📅 Market data as of {dates}: not today's prices.",
    },
    "zh": {
        "alert_fired": "🔔 提醒 #{id}：{name} {symbol} — {condition}\n{day} 收盘 {close}（{observed}）。\n{source}",
        "alert_fired_live": "🔔 提醒 #{id}：{name} {symbol} — {condition}\n{day} 盘中实时：{observed}。"
        "日线数据截至 {prev}。\n{source}",
        "alert_fired_more": "🔔 另有 {n} 条提醒触发：{items}",
        "alert_fired_plain": "🔔 提醒 #{id}：{symbol} — {condition}（{day}，{observed}）",
        "alerts_off": "提醒需要行情工具和数据库。",
        "alerts_none": "还没有设置提醒。可以直接说，例如“600519 收盘跌破 1400 时提醒我”。",
        "alerts_head": "提醒（{n} 条）：",
        "alerts_watchlist": "自选股：{symbols}",
        "alerts_removed": "已删除提醒 #{id}：{condition}",
        "alerts_usage": "用法：/alerts [list] | /alerts remove <编号>",
        "alerts_error": "⚠️ {error}",
        "status_data": "行情数据：{dates} · {source}",
        "data_line": "📅 行情数据截至 {dates}。",
        "data_stale": "📅 行情数据截至 {dates}，不是今天的价格。",
    },
}
