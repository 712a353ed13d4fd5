"""The JSON shape of `export(client_id)`: everything stored about one client; no I/O."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from langchain_core.messages import message_to_dict

from langchain_rolling_memory.core.records import Fact, SessionInfo, StoredMessage, SummaryRecord


def session_export(
    info: SessionInfo | None,
    summary: SummaryRecord | None,
    state: str | None,
    messages: list[StoredMessage],
) -> dict[str, Any]:
    return {
        "session_id": info.session_id if info else None,
        "created_at": info.created_at if info else None,
        "updated_at": info.updated_at if info else None,
        "summary": asdict(summary) if summary else None,
        "state": json.loads(state) if state else {},
        "transcript": [
            {
                "seq": m.seq,
                "created_at": m.created_at,
                "tokens": m.tokens,
                "message": message_to_dict(m.message),
            }
            for m in messages
        ],
    }


def client_export(
    client_id: str, facts: list[Fact], sessions: list[dict[str, Any]], now: float
) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "exported_at": now,
        "facts": [f.to_dict() for f in facts],
        "sessions": sessions,
    }
