"""The bot's own words in English and Chinese, as one catalogue of `Text`s (agent/texts.py, the
format every table of words uses); the alerts', commands', consent and tasks' catalogues are
merged into it. The language is chosen per chat from the user's client language and can be
switched with /lang."""

from __future__ import annotations

from typing import Any

from agent.texts import Text, pick_language, say

__all__ = ["STRINGS", "pick_language", "t"]

STRINGS: dict[str, Text] = {
    "busy_elsewhere": Text(
        en="⏳ I'm still busy with this chat's previous turn; please send that again in a moment.",
        zh="⏳ 这个对话的上一轮还在进行，请稍后再发一次。",
    ),
    "start": Text(
        en="Hi, I'm tapebot, your investing assistant. Ask me things like “analyze 600519”, “how is my portfolio?”, or “screen the market for springs”. /help lists commands.",
        zh="你好，我是 tapebot，你的投资助手。可以问我“分析 600519”、“我的持仓怎么样”、“全市场筛选 spring 形态”。/help 查看命令。",
    ),
    "not_allowed": Text(
        en="Sorry, you are not on this bot's allow-list. Your user id is {user_id}; ask the operator to add it.",
        zh="抱歉，你不在此机器人的允许名单中。你的用户 ID 是 {user_id}，请联系管理员添加。",
    ),
    "unknown_command": Text(
        en="Unknown command /{name}. /help lists the commands.",
        zh="未知命令 /{name}。/help 查看可用命令。",
    ),
    "new_session": Text(
        en="Started a new conversation.",
        zh="已开始新的对话。",
    ),
    "cleared": Text(
        en="Cleared this conversation's history.",
        zh="已清空本对话的历史。",
    ),
    "cancelled": Text(
        en="Stopped the running turn.",
        zh="已停止当前任务。",
    ),
    "nothing_to_cancel": Text(
        en="Nothing is running.",
        zh="当前没有正在运行的任务。",
    ),
    "busy_queued": Text(
        en="Got it — I'll include that in the current task.",
        zh="收到——我会把这条一并纳入当前任务。",
    ),
    "model_current": Text(
        en="Model: {model}. Available: {models}. Switch with /model <id>.",
        zh="当前模型：{model}。可用：{models}。使用 /model <id> 切换。",
    ),
    "model_switched": Text(
        en="Switched this conversation to {model}.",
        zh="本对话已切换到 {model}。",
    ),
    "model_unknown": Text(
        en="No model named “{model}”. Available: {models}.",
        zh="没有名为“{model}”的模型。可用：{models}。",
    ),
    "lang_set": Text(
        en="Language set to English.",
        zh="语言已切换为中文。",
    ),
    "lang_usage": Text(
        en="Usage: /lang en or /lang zh",
        zh="用法：/lang en 或 /lang zh",
    ),
    "approval_title": Text(
        en="Approval needed",
        zh="需要确认",
    ),
    "approval_body": Text(
        en="{tool} wants to run with:",
        zh="{tool} 将以如下参数执行：",
    ),
    "card_sources": Text(
        en="⚠️ Proposed after reading outside content: {sources}. Check it is what you asked for.",
        zh="⚠️ 此操作是在读取外部内容之后提出的：{sources}。请确认这是你要求的。",
    ),
    "card_cut": Text(
        en="truncated: {cut} of {total} characters not shown",
        zh="已截断：共 {total} 个字符，中间 {cut} 个未显示",
    ),
    "card_cut_arg": Text(
        en="{name} is {length} characters long",
        zh="{name} 共 {length} 个字符",
    ),
    "btn_once": Text(
        en="Allow once",
        zh="允许一次",
    ),
    "btn_always": Text(
        en="Always allow",
        zh="总是允许",
    ),
    "btn_deny": Text(
        en="Deny",
        zh="拒绝",
    ),
    "approval_hint": Text(
        en="Reply to this message to ask for changes. Expires in {minutes} min.",
        zh="回复此消息可要求修改。{minutes} 分钟后过期。",
    ),
    "approved_by": Text(
        en="✅ Approved by {who}",
        zh="✅ 已由 {who} 批准",
    ),
    "approved_always_by": Text(
        en="✅ Always allowed in this chat by {who}",
        zh="✅ 已由 {who} 设为本对话总是允许",
    ),
    "denied_by": Text(
        en="🚫 Denied by {who}",
        zh="🚫 已被 {who} 拒绝",
    ),
    "edit_by": Text(
        en="✏️ Changes requested by {who}",
        zh="✏️ {who} 要求修改",
    ),
    "expired": Text(
        en="⌛ Expired — nothing was executed",
        zh="⌛ 已过期——未执行任何操作",
    ),
    "moved_on": Text(
        en="↪️ Skipped — you moved on",
        zh="↪️ 已跳过——你开始了新的话题",
    ),
    "approval_not_allowed": Text(
        en="You are not allowed to decide this.",
        zh="你无权处理此确认。",
    ),
    "approval_stale": Text(
        en="This button is no longer valid.",
        zh="此按钮已失效。",
    ),
    "approval_usage": Text(
        en="Usage: /approve <id> or /deny <id>",
        zh="用法：/approve <id> 或 /deny <id>",
    ),
    "question_expired": Text(
        en="⌛ No answer was given in time.",
        zh="⌛ 未在规定时间内回答。",
    ),
    "exec_sandboxed": Text(
        en="🛡 Runs in a sandbox: only the workspace is writable, no network, no access to tapebot's files.",
        zh="🛡 在沙箱中运行：只有工作区可写，无网络，无法访问 tapebot 自身的文件。",
    ),
    "exec_sandboxed_net": Text(
        en="🛡 Runs in a sandbox: only the workspace is writable, network allowed, no access to tapebot's files.",
        zh="🛡 在沙箱中运行：只有工作区可写，允许联网，无法访问 tapebot 自身的文件。",
    ),
    "exec_unsandboxed": Text(
        en="⚠️ Runs WITHOUT a sandbox (unsandboxed_exec = true): it can read and change everything the bot's user can.",
        zh="⚠️ 不在沙箱中运行（unsandboxed_exec = true）：可以读写机器人所用账户能访问的一切。",
    ),
    "exec_refused": Text(
        en="⚠️ No sandbox is available on this machine, so this command will be refused.",
        zh="⚠️ 本机没有可用的沙箱，此命令将被拒绝执行。",
    ),
    "exec_limits": Text(
        en="Limits: at most {processes} processes, {disk_mb} MB written to the workspace (more is stopped and removed), {memory_mb} MB of memory.",
        zh="限制：最多 {processes} 个进程，向工作区写入不超过 {disk_mb} MB（超出即停止并删除），内存 {memory_mb} MB。",
    ),
    "question_answered": Text(
        en="✅ Answered: {answer}",
        zh="✅ 已回答：{answer}",
    ),
    "error": Text(
        en="Something went wrong: {error}",
        zh="出错了：{error}",
    ),
    "internal_error": Text(
        en="Something went wrong inside the bot, so this message got no answer. The details are in its log; try again in a while.",
        zh="机器人内部出错，这条消息没有得到回答。详情已记入日志，请稍后再试。",
    ),
    "model_error": Text(
        en="⚠️ {error}",
        zh="⚠️ {error}",
    ),
    "model_rejected": Text(
        en="⚠️ The model provider rejected the request. The operator should check the model name and API key (details are in the log).",
        zh="⚠️ 模型服务拒绝了请求。请管理员检查模型名称和 API 密钥（详情见日志）。",
    ),
    "model_interrupted": Text(
        en="⚠️ The model's answer broke off, so your request was not carried out. Send it again to retry.",
        zh="⚠️ 模型的回答中断了，你的请求没有执行。请重新发送以重试。",
    ),
    "model_unavailable": Text(
        en="⚠️ The model provider is unavailable right now, so your request was not carried out. Send it again in a moment.",
        zh="⚠️ 模型服务暂时不可用，你的请求没有执行。请稍后重新发送。",
    ),
    "answer_broken_off": Text(
        en="… ⚠️ (broken off: not the whole answer)",
        zh="… ⚠️（回答中断：这不是完整的回答）",
    ),
    "secret_masked": Text(
        en="🔒 Your message contained what looks like a key or token. I masked it: it was not stored and I can't see it. If it is a real key, consider rotating it.",
        zh="🔒 你的消息里有看起来像密钥或令牌的内容，已被遮盖：它没有被保存，我也看不到。如果这是真实的密钥，建议更换。",
    ),
    "tool_running": Text(
        en="⏳ {tool}…",
        zh="⏳ {tool}…",
    ),
    "compacted": Text(
        en="🗜 Context compacted ({before} → {after} messages); older details are archived and can be restored.",
        zh="🗜 上下文已压缩（{before} → {after} 条消息）；较早的细节已归档，可以恢复。",
    ),
    "status": Text(
        en="Model: {model}\nSession: {session}\nMessages: {messages} (≈{tokens} tokens of {window})\nRunning: {running}\nPending approvals: {approvals}\nWaiting for your answer: {question}",
        zh="模型：{model}\n会话：{session}\n消息：{messages}（约 {tokens} / {window} tokens）\n运行中：{running}\n待确认：{approvals}\n等待你的回答：{question}",
    ),
    "plan": Text(
        en="Plan",
        zh="计划",
    ),
    "too_long": Text(
        en="That message is too long ({size} characters; the limit is {limit}). Please shorten it or send the content as a file in the workspace.",
        zh="消息太长（{size} 个字符，上限 {limit}）。请精简，或把内容放到工作区文件中。",
    ),
    "unsupported": Text(
        en="I can only read text messages for now.",
        zh="目前我只能读取文字消息。",
    ),
    "not_taken_up": Text(
        en="{n} message(s) you sent before I restarted were too old to run now, so I did not act on them: “{first}”. Send again if still needed.",
        zh="重启前你发来的 {n} 条消息已超过时限，未执行：“{first}”。如仍需要请重新发送。",
    ),
    "paired": Text(
        en="Paired: you can talk to me now, and you approve actions. Send /help to start.",
        zh="配对成功：现在可以和我对话，并由你确认操作。发送 /help 开始。",
    ),
    "busy_try_later": Text(
        en="A turn is running; try again when it finishes (or /cancel it).",
        zh="当前有任务在运行；请等它完成后再试（或 /cancel）。",
    ),
    "compact_nothing": Text(
        en="Nothing to compact.",
        zh="没有需要压缩的内容。",
    ),
    "not_run": Text(
        en="not run",
        zh="未执行",
    ),
    "tool_cancelled": Text(
        en="cancelled",
        zh="已取消",
    ),
    "tool_failed": Text(
        en="failed",
        zh="失败",
    ),
    "delivery_failed": Text(
        en="I could not deliver my answer: the chat service kept failing. Ask again in a moment if you still need it.",
        zh="我的回答没能发出去：聊天服务一直出错。如仍需要，请稍后再问一次。",
    ),
    "delivery_uncertain": Text(
        en="The chat service did not confirm my last message, so it may be missing or incomplete. Ask again if you do not see the full answer.",
        zh="聊天服务没有确认我刚才的消息，它可能缺失或不完整。如果没看到完整回答，请再问一次。",
    ),
    "memory_off": Text(
        en="Long-term memory is turned off ([memory] enabled = false).",
        zh="长期记忆已关闭（[memory] enabled = false）。",
    ),
    "yes": Text(
        en="yes",
        zh="是",
    ),
    "no": Text(
        en="no",
        zh="否",
    ),
    "command_failed": Text(
        en="Sorry, /{name} failed. The details are in the log; try again later.",
        zh="抱歉，/{name} 执行失败。详情已记录在日志中，请稍后再试。",
    ),
    "compact_failed": Text(
        en="🗜 Compaction failed: the summary could not be written. Your history is unchanged; try again later.",
        zh="🗜 压缩失败：未能生成摘要。对话历史未改变，请稍后再试。",
    ),
    "storage_trouble": Text(
        en="⚠️ I'm having trouble saving messages right now (the database is busy or the disk is full). I'm keeping yours and will answer as soon as I can — no need to resend.",
        zh="⚠️ 目前保存消息遇到问题（数据库繁忙或磁盘已满）。你的消息我先保留着，一恢复就回复你——无需重发。",
    ),
    "storage_gave_up": Text(
        en="Sorry — I could not save your message “{preview}” (storage trouble). Please send it again in a few minutes.",
        zh="抱歉——无法保存你的消息“{preview}”（存储故障）。请过几分钟再发送一次。",
    ),
    "restarting_kept": Text(
        en="I'm restarting right now; I have your message and will answer it as soon as I'm back.",
        zh="我正在重启；你的消息已保存，回来后马上回复。",
    ),
    "restarting_again": Text(
        en="I'm restarting right now; please try that again in a minute.",
        zh="我正在重启，请一分钟后再试。",
    ),
    "button_failed": Text(
        en="⚠️ That tap didn't go through (something failed on my side); please tap the button again.",
        zh="⚠️ 这次点击没有生效（我这边出了问题），请再点一次按钮。",
    ),
    "progress_paused": Text(
        en="⏸ Paused for a restart; I'll resume after it.",
        zh="⏸ 因重启暂停；重启后继续。",
    ),
    "progress_cut_off": Text(
        en="cut off by the restart",
        zh="被重启中断",
    ),
    "answer_in_full": Text(
        en="↩️ The full answer (an unfinished copy may show above):",
        zh="↩️ 完整回答（上方可能有一份未完成的副本）：",
    ),
    "restart_resumed": Text(
        en="🔄 I was restarted while working on your request; continuing where I left off.",
        zh="🔄 处理你的请求时我被重启了；现在从中断处继续。",
    ),
    "restart_cut_off": Text(
        en="⚠️ {tool} was running when I restarted: it may or may not have completed, and it was not run again.",
        zh="⚠️ 重启时 {tool} 正在运行：它可能已完成，也可能没有，且不会重新执行。",
    ),
    "restart_approved": Text(
        en="✅ Your approval of {tool} still stands: running it now.",
        zh="✅ 你对 {tool} 的批准仍然有效：现在执行。",
    ),
    "brief_not_delivered": Text(
        en="⚠️ The brief you asked for could not be prepared (the details are in the log). Send /brief now to try again.",
        zh="⚠️ 你要的简报没能生成（详情见日志）。发送 /brief now 再试一次。",
    ),
    "restart_rechecked": Text(
        en="🔁 {tool} was running when I restarted: it is looked up by its order key now — its earlier result if it went through, else it runs once.",
        zh="🔁 重启时 {tool} 正在运行：现在按订单键核对——已成交则给出当时的结果，否则只执行一次。",
    ),
    "restart_not_resumed": Text(
        en="🔄 I was restarted while working on your request, too long ago to continue it now; nothing still pending was run. Send it again if you still need it.",
        zh="🔄 处理你的请求时我被重启了，且已过去太久，不再继续；未执行任何待办操作。如仍需要请重新发送。",
    ),
}


def t(lang: str, key: str, **kw: Any) -> str:
    return say(STRINGS, lang, key, **kw)


def _merge_tables() -> None:
    from bot.i18n_alerts import ALERT_STRINGS
    from bot.i18n_commands import COMMAND_STRINGS
    from bot.i18n_consent import CONSENT_STRINGS
    from bot.i18n_link import LINK_STRINGS
    from bot.i18n_tasks import TASK_STRINGS

    for table in (CONSENT_STRINGS, COMMAND_STRINGS, TASK_STRINGS, ALERT_STRINGS, LINK_STRINGS):
        STRINGS.update(table)


_merge_tables()
