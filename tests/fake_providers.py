"""Local HTTP servers that speak the OpenAI chat-completions and Gemini generateContent formats.

The real `ChatOpenAI` and `ChatGoogleGenerativeAI` clients are pointed at them (``base_url``),
so tests assert on the request bodies that would reach the provider. Nothing here calls the
network; each server listens on 127.0.0.1 on a free port, in a daemon thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Kind = Literal["openai", "gemini"]


@dataclass(frozen=True)
class Text:
    """Answer with this text."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """Answer with one tool call."""

    name: str
    args: dict[str, Any]
    id: str = "call-1"


@dataclass(frozen=True)
class Failure:
    """Answer with an HTTP error (and these response headers, e.g. ``{"retry-after": "0"}``)."""

    status: int
    message: str = "temporarily unavailable"
    headers: dict[str, str] = field(default_factory=dict)


Reply = Text | ToolCall | Failure
Responder = Callable[["Request"], Reply | str]


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    # ---- what a test usually asks of a request body, whatever the provider

    @property
    def wire(self) -> str:
        """The whole body as JSON text (non-ASCII kept as is)."""
        return json.dumps(self.body, ensure_ascii=False)

    def texts(self) -> list[str]:
        """Every text the request carries, in order: system instruction, then each turn."""
        found: list[str] = []
        if "messages" in self.body:  # OpenAI
            for message in self.body["messages"]:
                content = message.get("content")
                if isinstance(content, str):
                    found.append(content)
                elif isinstance(content, list):
                    found.extend(part.get("text", "") for part in content if isinstance(part, dict))
            return found
        system = self.body.get("systemInstruction") or self.body.get("system_instruction")
        if system:
            found.extend(part.get("text", "") for part in system.get("parts", []))
        for content in self.body.get("contents", []):
            found.extend(part["text"] for part in content.get("parts", []) if "text" in part)
        return found

    def turns(self) -> list[tuple[str, str]]:
        """``(role, text)`` per message (OpenAI) or content (Gemini, system instruction first)."""
        found: list[tuple[str, str]] = []
        if "messages" in self.body:
            for message in self.body["messages"]:
                content = message.get("content")
                if isinstance(content, list):
                    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
                found.append((message["role"], content or ""))
            return found
        system = self.body.get("systemInstruction") or self.body.get("system_instruction")
        if system:
            found.append(("system", " ".join(p.get("text", "") for p in system.get("parts", []))))
        for content in self.body.get("contents", []):
            text = " ".join(p["text"] for p in content.get("parts", []) if "text" in p)
            found.append((content.get("role", "user"), text))
        return found

    def roles(self) -> list[str]:
        """The role of each turn (OpenAI: messages; Gemini: contents, system instruction first)."""
        if "messages" in self.body:
            return [m["role"] for m in self.body["messages"]]
        roles = (
            ["system"] if (self.body.get("systemInstruction") or self.body.get("system_instruction")) else []
        )
        return roles + [c.get("role", "user") for c in self.body.get("contents", [])]


def _usage(request: Request, text: str) -> tuple[int, int]:
    # Deterministic token counts, so tests can check what the summarizer reports.
    return len(request.wire) // 4, max(1, len(text.split()))


def _openai_body(request: Request, reply: Text | ToolCall) -> dict[str, Any]:
    if isinstance(reply, ToolCall):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": reply.id,
                    "type": "function",
                    "function": {"name": reply.name, "arguments": json.dumps(reply.args)},
                }
            ],
        }
        finish, text = "tool_calls", reply.name
    else:
        message, finish, text = {"role": "assistant", "content": reply.text}, "stop", reply.text
    prompt, completion = _usage(request, text)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _gemini_body(request: Request, reply: Text | ToolCall) -> dict[str, Any]:
    if isinstance(reply, ToolCall):
        parts: list[dict[str, Any]] = [{"functionCall": {"name": reply.name, "args": reply.args}}]
        text = reply.name
    else:
        parts, text = [{"text": reply.text}], reply.text
    prompt, completion = _usage(request, text)
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": completion,
            "totalTokenCount": prompt + completion,
        },
        "modelVersion": "gemini-fake",
        "responseId": "fake-response",
    }


def _error_body(kind: Kind, failure: Failure) -> dict[str, Any]:
    if kind == "openai":
        return {"error": {"message": failure.message, "type": "server_error", "code": None, "param": None}}
    status = {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND",
        429: "RESOURCE_EXHAUSTED",
        500: "INTERNAL",
        503: "UNAVAILABLE",
    }
    return {
        "error": {
            "code": failure.status,
            "message": failure.message,
            "status": status.get(failure.status, "UNKNOWN"),
        }
    }


@dataclass
class FakeProvider:
    """A running fake server; `requests` holds every request it received, in order."""

    kind: Kind
    responder: Responder
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.kind == "openai" else root

    def respond(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Status, JSON body and extra headers of the answer to one request."""
        request = Request(path, headers, json.loads(raw or b"{}"))
        with self.lock:
            self.requests.append(request)
        reply = self.responder(request)
        if isinstance(reply, str):
            reply = Text(reply)
        if isinstance(reply, Failure):
            return reply.status, _error_body(self.kind, reply), reply.headers
        expected = "/chat/completions" if self.kind == "openai" else ":generateContent"
        if not path.endswith(expected):
            return 404, _error_body(self.kind, Failure(404, f"unexpected path {path}")), {}
        body = _openai_body(request, reply) if self.kind == "openai" else _gemini_body(request, reply)
        return 200, body, {}


def _handler(provider: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            status, body, extra = provider.respond(
                self.path, {k.lower(): v for k, v in self.headers.items()}, raw
            )
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            # No keep-alive: a client's pooled connection must not outlive the test's event loop.
            self.send_header("connection", "close")
            self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            return

    return Handler


@contextmanager
def serve(kind: Kind, responder: Responder) -> Iterator[FakeProvider]:
    """Run a fake `kind` server for the duration of the block."""
    provider = FakeProvider(kind, responder)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    server.daemon_threads = True
    provider.port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=f"fake-{kind}", daemon=True
    )
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
