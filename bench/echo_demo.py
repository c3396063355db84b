"""Recall echoes on the demo: does the consolidated to-do answer crowd out its sources?

    python bench/echo_demo.py

On the demo's real server (examples/two_weeks), alice's agent recalls her follow-ups with the
demo's two queries, answers with one consolidated list (written as a model writes it from those
passages, once close to their words and once paraphrased), and that new conversation is posted
like any other. Then the queries are asked again, and for each the top hits (k = the server's 3)
are counted: from the to-do conversation, or from the conversations it was built from. Each
variant runs twice: with echo detection off (IRENEO_ECHO_OVERLAP=0, "before") and on.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from dataclasses import replace
from pathlib import Path

from ireneo.config import Settings
from ireneo.demo import DemoServer, find_data, load_conversations
from ireneo.echoes import overlap, trigrams

QUESTION = "Give me one consolidated list of my open follow-ups across all earlier chats."
ANSWERS = {
    "close to the passages": (
        "Here is one consolidated list of your open follow-ups:\n"
        "1. Ask Tomas why the reconciliation columns for North were empty from 23 to 25 "
        "September. Owner: you. Due: Monday.\n"
        "2. Send Riverside's September scrap report to Jana. Owner: you. Due: Friday.\n"
        "3. Escalate the F-204 gaps (runs 8790 and 8812) to Priya, integrations lead, today.\n"
        "4. Check with Marek on Thursday whether the K-2 bearing arrived and MT-4471 can be "
        "closed. Owner: you.\n"
        "5. The N-11 upgrade proposal goes on the agenda of next Monday's ops meeting. "
        "Scheduling waits until MT-4471 is closed."
    ),
    "paraphrased": (
        "Your open items: talk to Tomas about North's empty reconciliation columns (23-25 Sep) "
        "by Monday; get Jana the Riverside scrap numbers for September before Friday; raise "
        "F-204 (runs 8790, 8812) with Priya today; on Thursday ask Marek if the K-2 bearing is "
        "in so MT-4471 can close; and put the N-11 proposal on Monday's ops agenda."
    ),
}
RECALLS = ("follow-up owner due", "follow-up escalate today")
PROBES = (
    *RECALLS,
    "Tomas reconciliation columns",
    "Jana scrap report",
    "Marek K-2 bearing Thursday",
    "Priya F-204 escalate",
    "N-11 proposal ops meeting",
)
TODO_ID = "2026-10-13-follow-ups"
REF = re.compile(r"^\[\d+\] .* · ref (\w+) · turn", re.M)


def todo_body(answer: str) -> dict:
    return {
        "user": "alice",
        "conversation_id": TODO_ID,
        "turns": [
            {"ts": "2026-10-13T08:30:00Z", "role": "user", "text": QUESTION},
            {"ts": "2026-10-13T08:31:00Z", "role": "assistant", "text": answer},
        ],
    }


def run(answer: str, detect: bool, settings: Settings) -> dict:
    echoes = replace(settings.echo_policy, overlap=0.5 if detect else 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        server = DemoServer(Path(tmp), settings.with_(echo_policy=echoes))
        try:
            for body in load_conversations(find_data()):
                server.post(body)
            server.wait_indexed()
            shown = [asyncio.run(server.recall("alice", query)) for query in RECALLS]
            server.post(todo_body(answer))
            server.wait_indexed()
            todo_ref = _ref_of(server)
            counts = {"todo": 0, "sources": 0}
            for query in PROBES:
                refs = REF.findall(asyncio.run(server.recall("alice", query)))
                counts["todo"] += refs.count(todo_ref)
                counts["sources"] += len(refs) - refs.count(todo_ref)
            counts["overlap"] = overlap(answer, set().union(*(trigrams(t) for t in shown)))
            return counts
        finally:
            server.close()


def _ref_of(server: DemoServer) -> str:
    from ireneo.server.memories import user_key

    registry = server._server.config.app.state.ireneo.registry
    with registry.lease(user_key("alice"), create=False) as memory:
        return memory.conversation_ref(TODO_ID)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    settings = Settings.from_env()
    print(f"{len(PROBES)} queries, top 3 hits each ({3 * len(PROBES)} slots)")
    print(
        "| answer | trigram overlap | echo detection | hits from the to-do answer | from its sources |"
    )
    print("|---|---|---|---|---|")
    for label, answer in ANSWERS.items():
        for detect in (False, True):
            c = run(answer, detect, settings)
            print(
                f"| {label} | {c['overlap']:.2f} | {'on' if detect else 'off'} | {c['todo']} | "
                f"{c['sources']} |"
            )


if __name__ == "__main__":
    main()
