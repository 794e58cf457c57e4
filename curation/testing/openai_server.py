"""A local OpenAI-compatible HTTP server with scripted answers, for tests and benchmarks.

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 only. What it answers is decided
by a *responder*: a function of the request body and the call number returning a ``Reply`` (an answer
text, or an HTTP status, a delay, or a dropped connection). The real ``openai`` client talks to it over HTTP,
so retries, timeouts and parsing are exercised for real.

    with OpenAIServer(fixed("hello", delay=0.2)) as server:
        server.base_url  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str | list[str] = ""
    status: int = 200
    delay: float = 0.0
    drop: bool = False  # close the connection without answering
    retry_after: float | None = None


Responder = Callable[[dict[str, Any], int], Reply]


def completion(body: dict[str, Any], contents: list[str]) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    completion_chars = sum(len(c) for c in contents)
    return {
        "id": f"chatcmpl-local-{int(time.time() * 1000)}", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", "local"),
        "choices": [{"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": c}}
                    for i, c in enumerate(contents)],
        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion_chars // 4,
                  "total_tokens": (prompt_chars + completion_chars) // 4},
    }


def user_text(body: dict[str, Any]) -> str:
    """All text of the request's messages (image parts left out), for rules to match on."""
    out = []
    for m in body.get("messages", []):
        c = m.get("content", "")
        if isinstance(c, list):
            out.extend(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
        else:
            out.append(str(c))
    return "\n".join(out)


def fixed(content: str, delay: float = 0.0) -> Responder:
    return lambda body, n: Reply(content=content, delay=delay)


def rules(table: list[tuple[str, Callable[[dict[str, Any], re.Match[str]], Reply | str]]],
          default: Reply | None = None) -> Responder:
    """First rule whose regex matches the request text answers; a str result is the answer text."""
    compiled = [(re.compile(p, re.S), f) for p, f in table]

    def respond(body: dict[str, Any], n: int) -> Reply:
        text = user_text(body)
        for rx, f in compiled:
            m = rx.search(text)
            if m:
                r = f(body, m)
                return Reply(content=r) if isinstance(r, str) else r
        return default or Reply(status=404, content="no rule matched")

    return respond


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: _Server

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "local", "object": "model", "owned_by": "local"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "request is not JSON"}})
            return
        srv = self.server
        with srv.lock:
            srv.calls += 1
            n = srv.calls
            srv.requests.append(body)
        reply = srv.responder(body, n)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop:
            self.close_connection = True
            self.connection.close()
            return
        if reply.status != 200:
            headers = {"Retry-After": str(reply.retry_after)} if reply.retry_after is not None else None
            msg = reply.content if isinstance(reply.content, str) else "error"
            self._send(reply.status, {"error": {"message": msg or f"HTTP {reply.status}", "type": "server_error"}},
                       headers)
            return
        contents = reply.content if isinstance(reply.content, list) else [reply.content] * int(body.get("n") or 1)
        self._send(200, completion(body, contents))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, responder: Responder) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.responder = responder
        self.lock = threading.Lock()
        self.calls = 0
        self.requests: list[dict[str, Any]] = []


class OpenAIServer:
    def __init__(self, responder: Responder) -> None:
        self._server = _Server(responder)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        return self._server.calls

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def set_responder(self, responder: Responder) -> None:
        self._server.responder = responder

    def reset(self) -> None:
        with self._server.lock:
            self._server.calls = 0
            self._server.requests.clear()

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m curation.testing.openai_server --delay 0.2 --content '{}'``: serve until killed.

    Prints the base URL on its first line of output, so a parent process can read it.
    """
    import argparse
    import signal
    import sys

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    ap.add_argument("--content", default="{}", help="the answer text")
    args = ap.parse_args(argv)
    server = OpenAIServer(fixed(args.content, delay=args.delay)).start()
    print(server.base_url, flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        server.stop()


if __name__ == "__main__":
    main()
