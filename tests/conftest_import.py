"""The import fixtures (tests/fixtures/import): real-shaped Claude Code, Codex and ChatGPT
transcripts, by path and session id. Imported by tests/test_import_formats.py and
tests/test_import_cli.py."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "import"
CLAUDE_DIR = FIXTURES / "claude_code" / "-home-alice-plant-reports"
CLAUDE_SESSION = "5f0c2a9e-3b1d-4c7a-9e2f-8d41b6a07c13"
CLAUDE_FILE = CLAUDE_DIR / f"{CLAUDE_SESSION}.jsonl"
CODEX_SESSION = "0199a3f1-6c2e-7d41-b8a2-5e9f0c3d7a16"
CODEX_FILE = FIXTURES / "codex/2026/10/05" / f"rollout-2026-10-05T07-58-12-{CODEX_SESSION}.jsonl"
CODEX_EARLY = (
    FIXTURES
    / "codex/2025/05/14/rollout-2025-05-14T10-02-11-6a1d2e3f-4b5c-4d6e-8f7a-9b0c1d2e3f4a.jsonl"
)
CHATGPT_FILE = FIXTURES / "chatgpt" / "conversations.json"
