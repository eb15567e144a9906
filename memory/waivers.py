"""Is this text an approval waiver? A small classifier over phrasings, English and Chinese.

A memory is recalled into later sessions as background about the user, so one that says approvals
are waived, given in advance or implied ("no need to ask me", "trade on your own", "treat my
silence as a yes", "自动执行不用确认") must never be stored, however it is worded. Approvals are
given by a person on the card for one exact action; this only keeps memory from carrying the
opposite. Where a model side-call reads the text too (memory extraction), its verdict counts as
well (memory.extraction).

The text is normalised (NFKC, format characters gone, lower case, one kind of apostrophe), cut into
statements at sentence ends and at contrast words ("…, but for stocks no need to confirm"), and a
statement is a waiver when
- it holds a phrasing that only ever means one (carte blanche, "approval is implied", 视为已批准);
- or, with the phrasings that keep consent taken out of it ("always ask me", "never … without
  asking", 必须先确认 — unless a negation comes right before them: "no need to ask me first"),
  it names consent (approval, confirmation, asking, the card, "my OK", 确认, 问我 …) near a word
  that does away with it (no need, skip, without, in advance, from now on, 不用, 自动 …), or it
  names an action the bot could take (trade, buy, execute, 下单 …) near a word that leaves the
  decision to the bot (on your own, autonomously, at your discretion, 自主, 全权 …).
"""

from __future__ import annotations

import re
import unicodedata

# The first phrasings met (matched after the keeping phrasings are taken out).
_LISTED_EN = re.compile(
    r"(pre-?\s?approv|pre-?\s?authori[sz]|auto-?\s?approv|blanket (approval|consent)"
    r"|approv\w*\s+(all|every|any)\b|(all|every|any)\s+(future\s+)?(trades?|orders?|actions?|commands?)\s+"
    r"(are|is)\s+(already\s+)?(approved|authori[sz]ed|allowed)"
    r"|authori[sz]\w*\s+(all|every|any)\b|already\s+(approved|authori[sz]ed|consented)"
    r"|(without|no need (to|for)|never|don'?t|do not|stop)\s+(ask|asking|request\w*|wait\w*|seek\w*)\s+"
    r"(for\s+)?(the\s+)?(user'?s?\s+)?(approval|confirmation|consent|permission)"
    r"|without\s+(the\s+user'?s?\s+)?(approval|confirmation|consent|permission|asking)"
    r"|no\s+(approval|confirmation|consent)\s+(is\s+)?(needed|required|necessary)"
    r"|(skip|bypass|ignore|disable)\s+(the\s+)?(approval|confirmation|consent)(?!\s*(candle|bar|signal|pattern|rating|of\b|on\b))"
    r"|always\s+allow\s+(all|every|any|trades?|orders?))",
    re.IGNORECASE,
)
_LISTED_ZH = re.compile(
    r"(预先?(批准|授权|同意)|已(经)?(批准|授权|同意)(了)?(所有|全部|一切|以后)|(无需|不用|不需要|不必|免)(再)?"
    r"(确认|审批|批准|授权|询问|同意)|自动(批准|授权|确认|同意)|(跳过|绕过)(审批|确认|批准)"
    r"|(所有|全部|一切)(交易|订单|操作)(都)?(已)?(被)?(批准|授权|允许))"
)


# Phrasings that are a waiver wherever they stand.
_EXPLICIT = re.compile(
    r"carte blanche|free (hand|rein)|blank cheque|blank check|no questions asked"
    r"|pre-?\s?(approv|authori[sz]|consent|confirm|sign)|auto-?\s?(approv|confirm|accept|authori[sz])"
    r"|blanket (approval|consent|permission|authori[sz]ation|ok|yes)"
    r"|(silence|no (reply|answer|response)|not answering|not replying)\s+(\w+\s+){0,2}(as|means|counts as|is|=)\s+"
    r"(an?\s+)?(yes|consent|approval|agreement|ok|go-?ahead)"
    r"|(assume|default to|take it as|treat it as|count it as)\s+(an?\s+)?(yes|approval|consent|ok)\b"
    r"|(approval|consent|permission|confirmation|authori[sz]ation|ok|go-?ahead)s?\s+(is|are|was|has been|have been)\s+"
    r"(already\s+)?(implied|implicit|assumed|given|granted|automatic|standing|permanent|a given)"
    r"|(implied|implicit|standing|automatic|general|permanent|ongoing|open-ended|unconditional)\s+"
    r"(approval|consent|permission|authori[sz]ation|go-?ahead)"
    r"|(have|has|got|with|give you|gives you|giving you)\s+(my|the user'?s?|his|her|full|complete)\s+"
    r"(\w+\s+)?(permission|approval|consent|authori[sz]ation|blessing|ok|go-?ahead)\s+"
    r"(for|to|on)\s+(all|every|any|each|future|whatever|anything|everything)"
    r"|(consider|treat|take|regard|count|deem|assume)\s+(\w+\s+){0,4}(as|to be)\s+(already\s+)?"
    r"(pre-?)?(approved|confirmed|ok|okay|signed off|agreed|consented|authori[sz]ed|allowed|a yes)"
    r"|(视为|视作|当作|当成|算作|算是|就当|默认|一律)(已|已经)?(被)?(批准|同意|确认|授权|许可|通过)"
    r"|先斩后奏|不用(请示|汇报|报备)|(授权|允许|准许)(你|机器人|助手|bot|ai)\s*(自主|自行|全权|随意|直接|自动|自己)"
    r"|全权(委托|代理|负责|处理|决定)|(默许|默认同意|默认批准)"
    r"|(cleared|free|authori[sz]ed|allowed|empowered|entitled)\s+to\s+(just\s+)?(trade|execute|buy|sell|act|place|order|invest)"
    r"|(approvals?|confirmations?|consent|cards?|asking)\s*[:=]\s*(off|none|no|disabled|skip\w*|never|not needed)"
    r"|(everything|anything|the rest|all else)( else)?\s+(\w+\s+){0,3}(you can|you may|just)\s+(just\s+)?(do|go|handle|execute|proceed)"
)
# Phrasings that keep consent: taken out before the rest is read.
_KEEPS = re.compile(
    r"always\s+(ask|confirm|check)(\s+with)?(\s+me)?"
    r"|never\s+\w+(\s+\w+){0,8}\s+without\s+(first\s+)?(ask\w*|approv\w*|confirm\w*|consent|permission|my ok|checking)(\s+me)?"
    r"|(ask|confirm|check\s+with)\s+(me\s+|the user\s+)?(first|before)"
    r"|only\s+(after|with|once)\s+(i|my|the user'?s?)\s+(\w+\s+)?(approv\w*|confirm\w*|consent|ok|say)"
    r"|(must|should|has to|have to|needs to)\s+(always\s+)?(ask|confirm|get\s+(my\s+)?(approval|confirmation|consent|ok))"
    r"|必须(先|要)?(确认|询问|问我|批准|经我同意|征求)|(先|都要|务必|一定要|必须)(确认|问我|询问|请示|征求)"
    r"|未经(我|用户)?的?(同意|批准|确认|允许|授权)\S{0,4}(不得|不要|不准|不许|禁止|别|不能)"
    r"|(不得|不要|不准|不许|禁止|别|不能)(擅自|自行|自动|私自|直接)"
)
# A keeping phrasing right after a negation waives instead ("no need to ask me first").
_NEGATED_BEFORE = re.compile(
    r"\b(no need|needn't|don't|do not|doesn't|does not|never|stop|no longer|not|no|without|quit)\s+(\w+\s+){0,3}(to\s+)?$"
    r"|(不用|无需|不必|别再?|不要再?|不需要再?|免得?|没必要)\s*\S{0,2}$"
)
_CONSENT = re.compile(
    r"(?<!fda )(?<!drug )(?<!regulatory )approv(?!\w*\s+ratings?)|consent|permission|authori[sz]"
    r"|(my|user'?s?|your|his|her)\s+(\w+\s+)?confirm|confirm\w*\s+(with|from|by)\s+(me|the user|him|her)"
    r"|confirmations\b|confirmation\s*(card|step|prompt|dialog|button|message|request|screen|:|is|are|not|un)"
    r"|\bconfirm(ing)?\s+(it|them|orders?|trades?|each|every|anything|before|first|the (trade|order))|\bto confirm\b"
    r"|sign(ed|ing|s)?[\s-]?off|green light|go-?ahead|blessing"
    r"|(my|an|the|your|user's|his|her)\s+(ok|okay|yes)\b|\bok'?(d|ed)\b|\bokayed\b|\bsay(ing)? (yes|ok)\b"
    r"|(?<!bid-)(?<!bid/)(?<!bid )\bask(s|ed|ing)?\b(?!\s*(price|prices|side|spread|size|quote))|\bcheck(ing|s)?\s+(in\b|with\s+(me|the user|him|her))"
    r"|(trade|order|approval|confirmation|exec|these|those|the|any|its) (cards?|buttons?)\b|\btap(ping)? (allow|yes|approve)"
    r"|批准|(?<!回调)(?<!趋势)(?<!突破)(?<!信号)(?<!放量)(?<!底部)(?<!顶部)确认|同意|授权|询问|问我|请示|审批|许可|征求"
    r"|卡片|按钮|点按|过问|过目|点头|我的意见|我同意"
)
_WAIVE = re.compile(
    r"no need|needn't|unnecessary|not (be )?(needed|required|necessary)|no (more|longer)|anymore|any more"
    r"|(don't|do not|doesn't|does not|never|won't|will not)\s+(have|need|require)|not\s+have\s+to|without"
    r"|skip|bypass|waiv|ignore|disabl|turn(ed)? off|switch(ed)? off|dispens|forgo|omit|spare me"
    r"|\bauto|in advance|ahead of time|beforehand|standing|once and for all|from now on|going forward"
    r"|for good|henceforth|implied|implicit|regardless"
    r"|(don't|do not|never|stop|quit|no more)\s+(\w+\s+)?(bother|ping|pester|disturb|interrupt|trouble|bug|wait)"
    r"|(don't|do not|never|stop|quit)\s+(again\s+)?(to\s+)?(ask|confirm|check|request|seek|get|need|send|show)|never again"
    r"|无需|不用|不需要|不必|没必要|免|跳过|绕过|省去|省掉|省了|别再|不要再|不再|直接|自动|自行|全权|随意|随便"
    r"|预先|提前|事先|以后都|以后一律|一律|永久|每次都不"
)
_ACTION = re.compile(
    r"\b(trade|trades|trading|buy|buys|buying|sell|sells|selling|order|orders|execut\w*|place|placing"
    r"|act|acting|invest\w*|rebalanc\w*|transfer\w*|purchas\w*|short|shorting|run commands?|decide|decisions?)\b"
    r"|下单|交易|买入|卖出|买卖|买|卖|执行|操作|调仓|转账|决定|做主"
)
_AUTONOMY = re.compile(
    r"on (your|its|the bot's) own|by (your|it)sel(f|ves)|autonomous\w*|unsupervised|unattended"
    r"|at (your|its) (own )?discretion|full (discretion|authority|control|autonomy|trust)|your (own )?call"
    r"|without (me|my (involvement|input|say|knowledge)|involving me|checking|waiting|a card|a question|human)"
    r"|without (ping|bother|tell|notify|consult|involv|disturb|interrupt)\w* (me|the user)|at will"
    r"|you can just|just (do it|go ahead|buy|sell|trade|execute|place|proceed)|go ahead and|as you see fit"
    r"|whenever you (want|like|see fit|think)"
    r"|自主|自行|全权|随意|随便|擅自|自己(决定|做主|看着办|判断)|看着办|放手|不用管我|别管我|不必管我"
)
_STATEMENTS = re.compile(
    r"[.;!?。；！？\n]+|,?\s+\b(?:but|however|although|though|except|whereas|while|yet)\b\s+"
    r"|[，,]?\s*(?:但是|但|不过|可是|然而|除了|而)"
)
_WINDOW = 48  # characters between two parts for them to be read as one statement


def normalise(text: str) -> str:
    """Lower case after NFKC, format characters (zero-width and the like) gone, one apostrophe,
    runs of spaces as one."""
    # Per character rather than a translate table of every Cf code point: building that table
    # walked all 1.1M code points at import (~80 ms of every process's start).
    text = "".join(
        ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf"
    ).lower()
    return re.sub(r"\s+", " ", text.replace("\u2019", "'").replace("`", "'"))


def _near(a: re.Pattern[str], b: re.Pattern[str], text: str) -> bool:
    starts = [m.start() for m in a.finditer(text)]
    return bool(starts) and any(abs(m.start() - s) <= _WINDOW for m in b.finditer(text) for s in starts)


def _without_keeping_phrases(statement: str) -> str:
    out, last = [], 0
    for keep in _KEEPS.finditer(statement):
        if _NEGATED_BEFORE.search(statement[max(0, keep.start() - 24) : keep.start()]):
            continue  # "no need to ask me first": the negation makes it a waiver
        out.append(statement[last : keep.start()] + " ~ ")
        last = keep.end()
    out.append(statement[last:])
    return "".join(out)


def _statement_waives(statement: str) -> bool:
    if _EXPLICIT.search(statement):
        return True
    rest = _without_keeping_phrases(statement)
    if _LISTED_EN.search(rest) or _LISTED_ZH.search(rest):
        return True
    return _near(_CONSENT, _WAIVE, rest) or _near(_ACTION, _AUTONOMY, rest)


def is_waiver(text: str) -> bool:
    """True when any statement of `text` waives approvals, gives them in advance or implies them."""
    norm = normalise(text)
    return any(_statement_waives(s) for s in _STATEMENTS.split(norm) if s and s.strip())
