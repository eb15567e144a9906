"""The context archive: original messages that compaction moved out of the model's window.

    <root>/<session>/<id>.jsonl   one {"index": i, "message": {...}} per line (secrets redacted)
    <root>/<session>/<id>.json    metadata: summary, codes, files, keywords, anchors, archive_ref

References look like `archive://<session>/<id>`. `search` finds archives by stock code, file path
or keyword (a later mention of 600519 brings the archive's reference back into recall);
`restore` loads the original messages for `query_history(source="archive", archive_ref=…)`.
This is not long-term memory: it answers "what exactly happened earlier", not "how does this user
trade".
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent.compaction import PATH_RE, message_text
from agent.messages import Message, dump_messages, load_messages
from agent.ports import Clock, SystemClock
from agent.redact import Redactor
from memory.terms import CodeResolver, default_code_resolver, extract_codes, extract_keywords, top_keywords

ARCHIVE_SCHEME = "archive://"
_SAFE = re.compile(r"[^\w.@-]")
_ID_RE = re.compile(r"^ctx_\d{14}_[0-9a-f]{12}$")
_REF_RE = re.compile(r"^archive://([\w.@-]{1,128})/(ctx_\d{14}_[0-9a-f]{12})$")


class ArchiveMeta(BaseModel):
    archive_ref: str
    session_id: str
    compaction_id: str
    created_at: datetime
    message_count: int
    tail_start: int = 0
    summary: str = ""
    anchors: list[str] = Field(default_factory=list)
    codes: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    messages_path: str = ""


@dataclass(frozen=True, slots=True)
class ArchiveHit:
    meta: ArchiveMeta
    score: float
    matched: tuple[str, ...]


def query_terms(query: str) -> list[str]:
    """Words of a query for scanning archived text: whitespace-separated pieces of ≥2 characters
    (quotes and brackets stripped) plus the extracted keywords."""
    pieces = [p.strip("\"'“”‘’()（）[]【】,，。.!！?？:：;；") for p in (query or "").split()]
    words = [p for p in pieces if len(p) >= 2]
    return list(dict.fromkeys([*words, *extract_keywords(query, limit=8)]))[:12]


@functools.lru_cache(maxsize=4096)  # recall asks for the session's folder on every message
def safe_session(session_id: str) -> str:
    return _SAFE.sub("_", session_id or "default")[:128] or "default"


def parse_ref(ref: str) -> tuple[str, str]:
    """(session dir, compaction id) of an `archive://` reference; ValueError when malformed, so a
    model-supplied reference can never point outside the archive folder."""
    found = _REF_RE.match((ref or "").strip())
    if not found:
        raise ValueError(f"not an archive reference: {ref!r} (expected archive://<session>/ctx_…)")
    return found.group(1), found.group(2)


class FileArchiveStore:
    """Implements `agent.compaction.ArchiveStore` on plain files under `root`
    (`TAPEBOT_HOME/archive`). File I/O runs in a worker thread."""

    def __init__(
        self,
        root: Path,
        *,
        clock: Clock | None = None,
        redactor: Redactor | None = None,
        code_resolver: CodeResolver | None = None,
    ):
        self.root = Path(root)
        self.clock = clock or SystemClock()
        self.redactor = redactor or Redactor()
        self.code_resolver = code_resolver or default_code_resolver
        self._meta_cache: dict[Path, tuple[float, ArchiveMeta]] = {}

    # ---- writing ---------------------------------------------------------------------------------
    async def save(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        summary: str,
        anchors: Sequence[str],
        tail_start: int,
    ) -> str:
        now = self.clock.now().astimezone(UTC)
        dumped = dump_messages(list(messages))
        digest = hashlib.sha1(json.dumps(dumped, sort_keys=True, default=str).encode()).hexdigest()[:12]
        compaction_id = f"ctx_{now:%Y%m%d%H%M%S}_{digest}"
        session_dir = safe_session(session_id)
        ref = f"{ARCHIVE_SCHEME}{session_dir}/{compaction_id}"
        texts = [message_text(m) for m in messages]
        joined = "\n".join(texts)
        codes = list(dict.fromkeys(extract_codes(joined) + self._resolve(summary)))[:24]
        files = list(dict.fromkeys(PATH_RE.findall(joined)))[:24]
        meta = ArchiveMeta(
            archive_ref=ref,
            session_id=session_id,
            compaction_id=compaction_id,
            created_at=now,
            message_count=len(messages),
            tail_start=tail_start,
            summary=summary[:500],
            anchors=list(anchors),
            codes=codes,
            files=files,
            keywords=top_keywords([summary, *texts], limit=80),
            messages_path=f"{session_dir}/{compaction_id}.jsonl",
        )
        await asyncio.to_thread(self._write, session_dir, compaction_id, dumped, meta)
        return ref

    def _resolve(self, text: str) -> list[str]:
        try:
            return list(self.code_resolver(text))
        except Exception:  # noqa: BLE001 — a configured resolver's failure falls back to the built-in extractor
            return extract_codes(text)

    def _write(
        self, session_dir: str, compaction_id: str, dumped: list[dict[str, Any]], meta: ArchiveMeta
    ) -> None:
        folder = self.root / session_dir
        folder.mkdir(parents=True, exist_ok=True)
        lines = [
            json.dumps({"index": i, "message": self.redactor.value(m)}, ensure_ascii=False)
            for i, m in enumerate(dumped)
        ]
        tmp = folder / f"{compaction_id}.jsonl.tmp"
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(folder / f"{compaction_id}.jsonl")
        meta_tmp = folder / f"{compaction_id}.json.tmp"
        meta_tmp.write_text(meta.model_dump_json(indent=1), encoding="utf-8")
        meta_tmp.replace(folder / f"{compaction_id}.json")  # written last: an index entry implies data

    # ---- reading ---------------------------------------------------------------------------------
    async def restore(self, archive_ref: str) -> list[Message]:
        """The original messages behind a reference. ValueError for a malformed reference,
        LookupError when it does not exist."""
        session_dir, compaction_id = parse_ref(archive_ref)
        path = self.root / session_dir / f"{compaction_id}.jsonl"

        def read() -> list[Message]:
            if not path.is_file():
                raise LookupError(f"archive not found: {archive_ref}")
            rows = [
                json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            rows.sort(key=lambda r: r.get("index", 0))
            return load_messages([r["message"] for r in rows])

        return await asyncio.to_thread(read)

    async def get(self, archive_ref: str) -> ArchiveMeta | None:
        session_dir, compaction_id = parse_ref(archive_ref)
        return await asyncio.to_thread(self._load_meta, self.root / session_dir / f"{compaction_id}.json")

    async def list_archives(self, session_id: str | None = None) -> list[ArchiveMeta]:
        """Archives of one session (or all sessions), newest first."""
        # recall asks on every message: one stat on the loop (no pathlib) beats a thread hop
        if session_id and not os.path.isdir(os.path.join(self.root, safe_session(session_id))):  # noqa: ASYNC240
            return []
        return await asyncio.to_thread(self._list_sync, session_id)

    def _list_sync(self, session_id: str | None) -> list[ArchiveMeta]:
        if not self.root.is_dir():
            return []
        folders = (
            [self.root / safe_session(session_id)]
            if session_id
            else [p for p in self.root.iterdir() if p.is_dir()]
        )
        metas = []
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in folder.glob("ctx_*.json"):
                if _ID_RE.match(path.stem):
                    meta = self._load_meta(path)
                    if meta is not None:
                        metas.append(meta)
        return sorted(metas, key=lambda m: m.created_at, reverse=True)

    def _load_meta(self, path: Path) -> ArchiveMeta | None:
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        cached = self._meta_cache.get(path)
        if cached and cached[0] == mtime:
            return cached[1]
        try:
            meta = ArchiveMeta.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        self._meta_cache[path] = (mtime, meta)
        return meta

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        codes: Sequence[str] = (),
        limit: int = 5,
        deep: bool = False,
    ) -> list[ArchiveHit]:
        """Archives whose codes, files, keywords or summary mention the query's stock codes (and
        names resolved to codes), file paths, keywords or an `archive://` reference. Scored by the
        number of matched terms; codes and references weigh most. `deep` also scans the archived
        text itself for the query's words (the model's explicit search; recall stays on metadata)."""
        metas = await self.list_archives(session_id)
        if not metas:
            return []
        wanted_codes = list(dict.fromkeys([*codes, *self._resolve(query)]))
        files = PATH_RE.findall(query or "")
        keywords = extract_keywords(query, limit=8)
        refs = re.findall(r"archive://[\w.@-]+/ctx_\d{14}_[0-9a-f]{12}", query or "")
        hits = []
        for meta in metas:
            score, matched = 0.0, []
            if meta.archive_ref in refs:
                score += 10
                matched.append(meta.archive_ref)
            for code in wanted_codes:
                if code in meta.codes:
                    score += 3
                    matched.append(code)
            haystack = " ".join([meta.summary, *meta.files, *meta.keywords]).lower()
            for f in files:
                if f.lower() in haystack:
                    score += 2
                    matched.append(f)
            for kw in keywords:
                if kw.lower() in haystack:
                    score += 1
                    matched.append(kw)
            if deep:
                found = await asyncio.to_thread(self._scan, meta, query_terms(query))
                score += 0.5 * len(found)
                matched.extend(found)
            if score > 0:
                hits.append(ArchiveHit(meta, score, tuple(dict.fromkeys(matched))))
        hits.sort(key=lambda h: (h.score, h.meta.created_at), reverse=True)
        return hits[:limit]

    def _scan(self, meta: ArchiveMeta, terms: Sequence[str]) -> list[str]:
        if not terms:
            return []
        try:
            text = (self.root / meta.messages_path).read_text(encoding="utf-8")
        except OSError:
            return []
        # The JSONL escapes nothing for CJK (ensure_ascii=False); compare case-insensitively.
        low = text.lower()
        return [t for t in terms if t.lower() in low]

    async def recall_lines(self, session_id: str, query: str, *, limit: int = 2) -> list[str]:
        """Lines for the `# 压缩归档` recall section: reference, matched terms, summary excerpt."""
        hits = await self.search(query, session_id=session_id, limit=limit)
        lines = []
        for hit in hits:
            when = hit.meta.created_at.astimezone(UTC).strftime("%Y-%m-%d")
            gist = " ".join(hit.meta.summary.split())[:80]
            lines.append(f"- {hit.meta.archive_ref} [{when}] 命中: {', '.join(hit.matched[:4])} | {gist}")
        return lines
