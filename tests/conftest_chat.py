"""Helpers for the chat tests: a fake OpenAI-compatible model, served for real on 127.0.0.1.
Imported by tests/test_chat.py and tests/test_openapi_fuzz.py."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ADMIN_KEY = "test-admin-key-9876543210"


class FakeModel:
    """An OpenAI chat-completions endpoint on 127.0.0.1 that answers from the prompt it gets.

    Modes: "echo" (quotes the memory block of the system prompt back), "slow" (answers after
    `delay` seconds), "error" (500), "garbage" (200, not a completion), "empty" (no content).
    Every request is kept in `requests`.
    """

    def __init__(self):
        self.mode = "echo"
        self.delay = 3.0
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append(
                    {"path": self.path, "auth": self.headers.get("authorization"), "body": body}
                )
                if fake.mode == "slow":
                    time.sleep(fake.delay)
                if fake.mode == "error":
                    self._send(500, b'{"error": {"message": "model overloaded"}}')
                elif fake.mode == "garbage":
                    self._send(200, b"<html>not json</html>")
                elif fake.mode == "empty":
                    self._send(200, json.dumps({"choices": [{"message": {}}]}).encode())
                else:
                    self._send(200, json.dumps(fake.completion(body)).encode())

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (timeout tests)
                    self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    @staticmethod
    def completion(body: dict) -> dict:
        system = body["messages"][0]["content"]
        block = system.split("Previous relevant memories:\n", 1)[1]
        if block.strip() == "(none)":
            answer = "I'm sorry to hear that. Please retry, and check with your bank."
        else:
            answer = "From your history:\n" + block
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
        }

    def prompts(self) -> list[str]:
        return [r["body"]["messages"][0]["content"] for r in self.requests]

    def close(self) -> None:
        self.http.shutdown()
