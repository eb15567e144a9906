"""Write-ups grounded in the engine's output: an analysis report for one stock and a strategy
decision (per stock or per holding). With a model client (agent ModelClient) the prose is written by
the model from a JSON fact sheet it is told to stay within; without one, a template is filled from
the same facts and the output says that no model was used. Either way the output names its sources
and the "as of" date.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from markets.wyckoff.engine import WyckoffAnalysis

if TYPE_CHECKING:
    from agent.providers.base import ModelClient

SYSTEM = (
    "You are a disciplined equity analyst using the Wyckoff method. Write only from the FACTS JSON you are "
    "given: quote levels, dates and evidence from it, invent nothing, and state the as-of date. Observations, "
    "not instructions: describe conditions and risks, no guarantees. Answer in the user's language if the "
    "facts include one; otherwise English. Keep it under 300 words."
)


def facts(a: WyckoffAnalysis, source: str, position: dict[str, Any] | None = None) -> dict[str, Any]:
    d = a.to_dict(max_events=10)
    d["source"] = source
    if position:
        d["position"] = position
    return d


def decide(a: WyckoffAnalysis, held: bool) -> tuple[str, list[str]]:
    """Rule-based action from phase, triggers and health (the model may explain it, not change it)."""
    why: list[str] = []
    recent = {e.kind for e in a.recent_events(20) if e.status != "failed"}
    h = a.health
    if held:
        if h.rating == "red":
            why += h.dangers
            return "reduce_or_exit", why
        if h.rating == "yellow":
            why += h.warnings
            return "hold_with_caution", why
        why += h.positives[:3]
        return "hold", why
    bullish = recent & {"Spring", "SOS", "LPS"}
    if bullish and a.phase.schematic in ("accumulation", "markup") and h.rating != "red":
        why.append(f"recent {', '.join(sorted(bullish))} in {a.phase.label}")
        return "consider_buy", why
    if a.phase.schematic in ("distribution", "markdown"):
        why.append(a.phase.label)
        return "avoid", why
    why.append(f"no fresh trigger ({a.phase.label})")
    return "watch", why


def template_report(f: dict[str, Any]) -> str:
    r = f.get("range")
    lines = [
        f"**{f['name']}({f['symbol']})** — as of {f['as_of']}, close {f['close']:,} ({f['change_pct']:+.2f}%).",
        f"**Phase:** {f['phase']['label']} (confidence {f['phase']['confidence']:.2f}).",
    ]
    if r:
        lines.append(
            f"**Trading range:** {r['support']:,}–{r['resistance']:,} (width {r['width_pct']}%, {r['age']} bars, "
            f"quality {r['quality']})."
        )
    ev = f.get("events") or []
    if ev:
        lines.append(
            "**Recent events:** "
            + "; ".join(
                f"{e['date']} {e['kind']}" + (f" ({e['status']})" if e["status"] else "") for e in ev[-5:]
            )
            + "."
        )
    ind = f["indicators"]
    lines.append(
        f"**Trend:** MA20 {ind.get('ma20')}, MA50 {ind.get('ma50')}, MA200 {ind.get('ma200')}; RSI14 {ind.get('rsi14')}; "
        f"MACD(12,26,9) {ind.get('macd')} vs signal {ind.get('macd_signal')}; 20-day return {ind.get('ret_20d_pct')}%."
    )
    h = f["health"]
    lines.append(
        f"**Health:** {h['rating']} — " + "; ".join((h["dangers"] + h["warnings"] + h["positives"])[:4])
    )
    if "decision" in f:
        lines.append(
            f"**Decision (rules):** {f['decision']['action']} — " + "; ".join(f["decision"]["why"][:3])
        )
    lines.append("Evidence: " + " ".join(f["phase"]["evidence"][-3:]))
    lines.append(f"_Source: {f['source']}; Wyckoff engine rules in markets/wyckoff. Not investment advice._")
    return "\n".join(lines)


async def write(model: ModelClient | None, f: dict[str, Any], task: str) -> tuple[str, str | None]:
    """(text, model name or None). Falls back to the template when the model call fails."""
    if model is None:
        return template_report(
            f
        ) + "\n_No language model was used: this is a template filled from the engine's output._", None
    from agent.messages import Message
    from agent.providers.base import ModelRequest, TextChunk

    req = ModelRequest(
        messages=[Message.user(f"{task}\n\nFACTS:\n{json.dumps(f, ensure_ascii=False, default=str)}")],
        system=SYSTEM,
        max_tokens=1200,
    )
    parts: list[str] = []
    try:
        async for chunk in model.stream(req):
            if isinstance(chunk, TextChunk):
                parts.append(chunk.text)
    except Exception as exc:  # noqa: BLE001 — any model/provider failure falls back to the template report
        return template_report(
            f
        ) + f"\n_The model call failed ({type(exc).__name__}); template report shown._", None
    text = "".join(parts).strip() or template_report(f)
    return text, getattr(getattr(model, "info", None), "model", None) or "model"
