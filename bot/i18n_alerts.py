"""What a chat sees of alerts and market data dates, in its language. Merged into bot/i18n.STRINGS."""

from __future__ import annotations

from agent.texts import Text

ALERT_STRINGS: dict[str, Text] = {
    "alert_fired": Text(
        en="🔔 Alert #{id}: {name} {symbol} — {condition}\nClose {close} on {day} ({observed}).\n{source}",
        zh="🔔 提醒 #{id}：{name} {symbol} — {condition}\n{day} 收盘 {close}（{observed}）。\n{source}",
    ),
    "alert_fired_live": Text(
        en="🔔 Alert #{id}: {name} {symbol} — {condition}\nLive in the {day} session: {observed}. Daily bars to {prev}.\n{source}",
        zh="🔔 提醒 #{id}：{name} {symbol} — {condition}\n{day} 盘中实时：{observed}。日线数据截至 {prev}。\n{source}",
    ),
    "alert_fired_more": Text(
        en="🔔 {n} more alerts fired: {items}",
        zh="🔔 另有 {n} 条提醒触发：{items}",
    ),
    "alert_fired_plain": Text(
        en="🔔 Alert #{id}: {symbol} — {condition} ({day}, {observed})",
        zh="🔔 提醒 #{id}：{symbol} — {condition}（{day}，{observed}）",
    ),
    "alerts_off": Text(
        en="Alerts need the market tools and the database.",
        zh="提醒需要行情工具和数据库。",
    ),
    "alerts_none": Text(
        en='No alerts are set. Ask me, e.g. "tell me when 600519 closes below 1400".',
        zh="还没有设置提醒。可以直接说，例如“600519 收盘跌破 1400 时提醒我”。",
    ),
    "alerts_head": Text(
        en="Alerts ({n}):",
        zh="提醒（{n} 条）：",
    ),
    "alerts_watchlist": Text(
        en="Watchlist: {symbols}",
        zh="自选股：{symbols}",
    ),
    "alerts_removed": Text(
        en="Alert #{id} removed: {condition}",
        zh="已删除提醒 #{id}：{condition}",
    ),
    "alerts_usage": Text(
        en="Usage: /alerts [list] | /alerts remove <id>",
        zh="用法：/alerts [list] | /alerts remove <编号>",
    ),
    "alerts_error": Text(
        en="⚠️ {error}",
        zh="⚠️ {error}",
    ),
    "status_data": Text(
        en="Market data: {dates} · {source}",
        zh="行情数据：{dates} · {source}",
    ),
    "data_line": Text(
        en="📅 Market data as of {dates}.",
        zh="📅 行情数据截至 {dates}。",
    ),
    "data_stale": Text(
        en="📅 Market data as of {dates}: not today's prices.",
        zh="📅 行情数据截至 {dates}，不是今天的价格。",
    ),
}
