"""What a recall no longer does on its answer's path, over a real server: the record of what it
showed is written after the answer (yet an echo posted right after the recall is still flagged,
the post writes the record first), and a token already verified is not verified again until it
expires (a token that expired is refused, a different signature is verified afresh).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import httpx2

from ireneo.server.memories import user_key
from ireneo.server.returned import RETURNED
from tests.conftest_server import (
    RunningServer,
    call_tool,
    conversation,
    good_claims,
    make_settings,
    raw_token,
)

SOURCE = [
    "Shift handover: the pump bearing noise on motor K-2 is logged as ticket MT-4471.",
    "Noted. MT-4471 must be closed before the N-11 upgrade can be scheduled; Marek from "
    "maintenance will check the bearing on Thursday.",
]
ECHO = (
    "Your follow-up: MT-4471 must be closed before the N-11 upgrade can be scheduled; Marek "
    "from maintenance will check the bearing on Thursday."
)


def test_an_echo_posted_right_after_a_recall_is_flagged(tmp_path):
    srv = RunningServer(make_settings(tmp_path))
    try:
        assert srv.post(conversation("handover", SOURCE, user="rita")).status_code == 202
        srv.wait_indexed()
        answer = srv.recall("rita", "MT-4471 N-11 upgrade Marek")
        assert "MT-4471" in answer
        # at once, before the queued record could have been written by its thread
        body = conversation(
            "todo", ["What is left before the upgrade?", ECHO], user="rita", day="2026-10-09"
        )
        assert srv.post(body).status_code == 202
        assert [t.echo for t in srv.stored_turns("rita", "todo")] == [False, True]
        assert RETURNED.wait_idle(10)
        with srv.state.registry.lease(user_key("rita"), create=False) as memory:
            since = datetime.now(UTC) - timedelta(hours=1)
            assert memory.store.returned_texts(since)  # the record is there
    finally:
        srv.close()


def test_a_remembered_token_still_expires_and_a_forged_one_is_verified(tmp_path):
    srv = RunningServer(make_settings(tmp_path))
    try:
        assert srv.post(conversation("c-t", ["Valve V-9 was replaced."], user="tess")).status_code
        url = f"{srv.url}/mcp"
        now = int(time.time())
        short = raw_token(good_claims("tess", iat=now, exp=now + 3))
        first = asyncio.run(call_tool(url, short, "recall_my_conversations", {"query": "V-9"}))
        again = asyncio.run(call_tool(url, short, "recall_my_conversations", {"query": "V-9"}))
        assert "V-9" in first and "V-9" in again
        forged = short[: short.rindex(".") + 1] + "A" * len(short.rsplit(".", 1)[1])
        assert post_mcp(url, forged).status_code == 401  # same claims, bad signature
        time.sleep(max(0.0, now + 4 - time.time()))
        assert post_mcp(url, short).status_code == 401  # expired, though remembered
    finally:
        srv.close()


def post_mcp(url: str, token: str) -> httpx2.Response:
    return httpx2.post(
        url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={
            "authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
