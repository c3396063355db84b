import shutil
from datetime import UTC, datetime

import pytest

from ireneo import Memory
from ireneo.config import Settings
from ireneo.embed import DEFAULT_MODEL, load_embedder
from ireneo.model import Hit
from ireneo.rerank import SENTENCE_WEIGHT, SentenceReranker, load_reranker
from ireneo.server.memories import user_key
from tests.conftest import conversation
from tests.conftest_models import overlap_cross_encoder
from tests.conftest_server import RunningServer, make_settings
from tests.conftest_server import conversation as posted_conversation

QUESTION = "Which work order did we open for the pump P-253 that failed to restart?"
ANSWER = "The pump P-253 refuses to come back up after the weekend shutdown, ticket MT-8305."
SMALL_TALK = [
    "The canteen had lasagna today, not bad at all.",
    "My daughter has a school play on Friday, so I'm leaving early.",
    "The coffee machine on the second floor is broken again.",
]


def hit(session_id: str, text: str, score: float = 1.0) -> Hit:
    return Hit(
        session_id, f"{session_id}-0", 0, datetime(2026, 10, 1, tzinfo=UTC), "user", text, score
    )


@pytest.fixture(scope="module")
def embedder():
    return load_embedder(DEFAULT_MODEL)


def cosine(embedder, text: str, query: str) -> float:
    return float(embedder.embed_passages([text])[0] @ embedder.embed_query(query))


def test_the_answering_sentence_speaks_for_its_turn(embedder):
    # The answer sits among small talk; the other turn is small talk only. Tied before.
    answer = " ".join([SMALL_TALK[0], SMALL_TALK[1], ANSWER, SMALL_TALK[2]])
    chatter = "Lunch at the canteen was fine. The fire drill took forty minutes."
    ranked = SentenceReranker(embedder).rerank(
        QUESTION, [hit("chatter", chatter), hit("answer", answer)]
    )
    assert [h.session_id for h in ranked] == ["answer", "chatter"]
    best = cosine(embedder, ANSWER, QUESTION)
    assert ranked[0].score == pytest.approx(1.0 + SENTENCE_WEIGHT * best, abs=1e-5)
    assert best > cosine(embedder, answer, QUESTION) + 0.1  # the whole turn reads diluted


def test_the_fused_order_stands_when_sentences_agree(embedder):
    hits = [hit("empty", "", 2.0), hit("first", ANSWER, 1.2), hit("second", ANSWER, 1.1)]
    ranked = SentenceReranker(embedder).rerank(QUESTION, hits)
    assert [h.session_id for h in ranked] == ["empty", "first", "second"]
    assert ranked[0].score == 2.0  # no text, no sentence: its score is kept
    assert ranked[1].score - 1.2 == pytest.approx(ranked[2].score - 1.1)
    assert SentenceReranker(embedder).rerank(QUESTION, []) == []


def test_a_memory_reranks_every_recall_it_is_asked_to(home, tmp_path):
    src = tmp_path / "src"
    conversation(
        src, "label", ["The label on the pump P-253 is missing, we need to print a new one."]
    )
    conversation(src, "ticket", [" ".join([*SMALL_TALK[:2], ANSWER, SMALL_TALK[2]])])
    with Memory(home) as plain:
        plain.index([src])
        fused = {h.session_id: h.score for h in plain.recall(QUESTION, k=2)}
    with Memory(home, settings=Settings.from_env({"IRENEO_RERANK": "sentences"})) as memory:
        assert memory.rerank == "sentences"
        hits = memory.recall(QUESTION, k=2)
        assert {h.session_id for h in hits} == set(fused)
        for h in hits:  # each score moved by the weight times a cosine in (0, 1]
            assert 0 < h.score - fused[h.session_id] <= SENTENCE_WEIGHT + 1e-6
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        memory.rerank = None
        assert {h.session_id: h.score for h in memory.recall(QUESTION, k=2)} == fused


def test_an_unknown_reranker_is_refused_by_name(home):
    with pytest.raises(
        ValueError, match="unknown reranker 'cross-encoder': choose none, sentences, or the path"
    ):
        Memory(home, rerank="cross-encoder")
    problems = Settings.from_env({"IRENEO_RERANK": "cross-encoder"}, dev=True).problems()
    assert any(p.startswith("IRENEO_RERANK: unknown reranker") for p in problems)


def test_the_server_reranks_with_its_setting(tmp_path):
    srv = RunningServer(make_settings(tmp_path, rerank="sentences"))
    try:
        texts = [*SMALL_TALK[:2], ANSWER]
        assert srv.post(posted_conversation("c-1", texts, user="pat")).status_code == 202
        srv.wait_indexed()
        assert "MT-8305" in srv.recall("pat", QUESTION)
        with srv.state.registry.lease(user_key("pat"), create=False) as memory:
            assert memory is not None and memory.rerank == "sentences"
    finally:
        srv.close()


def test_a_cross_encoder_orders_the_hits_by_its_score(tmp_path, embedder):
    reranker = load_reranker(str(overlap_cross_encoder(tmp_path / "ce")), embedder)
    assert load_reranker(str(tmp_path / "ce"), embedder) is reranker  # one session per process
    hits = [
        hit("none", "Lunch at the canteen was fine.", 3.0),
        hit("two", "The pump P-253 is due next month.", 1.0),
        hit("all", "Ticket MT-8305 is open for the pump P-253.", 2.0),
    ]
    ranked = reranker.rerank("ticket for pump P-253", hits)
    # the hit's tokens found in the query: ticket, -, for, pump, p, -, 253 and [SEP] in "all"
    assert [(h.session_id, h.score) for h in ranked] == [("all", 8.0), ("two", 5.0), ("none", 1.0)]
    long_query = "pump " * 600  # longer than the model's 512 tokens: the query is cut, not refused
    assert [h.session_id for h in reranker.rerank(long_query, hits)][0] in ("all", "two")


def test_a_memory_reranks_with_a_cross_encoder_directory(home, tmp_path):
    src = tmp_path / "src"
    conversation(
        src, "label", ["The label on the pump P-253 is missing, we need to print a new one."]
    )
    conversation(src, "ticket", [" ".join([*SMALL_TALK[:2], ANSWER, SMALL_TALK[2]])])
    directory = overlap_cross_encoder(tmp_path / "ce")
    with Memory(home, rerank=str(directory)) as memory:
        memory.index([src])
        hits = memory.recall("pump P-253 refuses to come back up after the weekend shutdown", k=2)
        assert [h.session_id for h in hits] == ["ticket", "label"]
        assert all(h.score == int(h.score) >= 2 for h in hits)  # the model's counts, not fusion's


def test_a_directory_that_is_not_a_cross_encoder_is_refused(home, tmp_path, embedder):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="it needs model.onnx"):
        Memory(home, rerank=str(tmp_path / "empty"))
    broken = tmp_path / "broken"
    shutil.copytree(overlap_cross_encoder(tmp_path / "ce"), broken)
    (broken / "model.onnx").write_bytes(b"not a graph")
    with pytest.raises(ValueError, match="is not a loadable cross-encoder"):
        load_reranker(str(broken), embedder)
