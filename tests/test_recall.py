import threading
import time
from dataclasses import replace

import pytest

from ireneo import Memory, relevance, search
from ireneo import memory as memory_module
from ireneo.embed import load_embedder
from ireneo.errors import ModelMismatch
from ireneo.store import Filters
from ireneo.store.sqlite import SQLiteStore
from tests.conftest import SAMPLES, conversation, turn_line, write_jsonl


@pytest.fixture
def sampled(memory):
    memory.index([SAMPLES])
    return memory


def sessions_of(hits):
    return [h.session_id for h in hits]


@pytest.mark.parametrize("query", ["MT-4471", "mt4471", "MT 4471", "4471", "ticket MT-4471"])
def test_identifier_found_whole_and_by_parts(sampled, query):
    assert sampled.recall(query, k=1)[0].session_id == "2026-10-03-shift-handover"


def test_identifier_does_not_match_a_near_miss(memory, tmp_path):
    conversation(tmp_path, "a", ["pump PMP-203 leaks"])
    conversation(tmp_path, "b", ["pump PMP-230 leaks"])
    memory.index([tmp_path])
    assert memory.recall("PMP-203", k=1)[0].session_id == "a"
    assert memory.recall("PMP-230", k=1)[0].session_id == "b"


def test_meaning_found_without_shared_words(sampled):
    # Every window may answer here (ireneo.relevance judges whether any does): the ranking is
    # what is tested. Six short conversations are too few to tell this question by meaning
    # alone from one about nothing they discuss.
    sampled.fusion = replace(sampled.fusion, lift=relevance.Lift(alone=0.0, with_words=0.0))
    hits = sampled.recall("who is responsible for the broken data delivery", k=3)
    assert "2026-10-01-nightly-jobs" in sessions_of(hits)


def test_hit_carries_date_role_and_neighbours(sampled):
    hit = sampled.recall("acceptable but tight", k=1)[0]
    assert (hit.session_id, hit.seq, hit.role) == ("2026-10-08-capacity-n11", 2, "user")
    assert hit.ts.isoformat() == "2026-10-08T09:18:00+00:00"
    seqs = [c.seq for c in hit.context]
    assert seqs == sorted(seqs) and {1, 3} <= set(seqs) <= {0, 1, 3, 4}
    assert "2,185 of 2,400" in hit.context[seqs.index(1)].text


def test_wider_radius_and_no_context(sampled):
    wide = sampled.recall("acceptable but tight", k=1, radius=2)[0]
    assert {0, 1, 3} <= {c.seq for c in wide.context}
    assert sampled.recall("acceptable but tight", k=1, radius=0)[0].context == []


def test_neighbouring_hits_are_not_repeated(sampled):
    hits = sampled.recall("N-11 upgrade", k=8)
    shown = [(h.session_id, s) for h in hits for s in [h.seq, *(c.seq for c in h.context)]]
    assert len([h for h in hits if h.session_id == "2026-10-08-capacity-n11"]) < 4
    assert len({(h.session_id, h.seq) for h in hits}) == len(hits)
    assert len(shown) >= len(hits)


@pytest.mark.parametrize(
    ("filters", "allowed", "best"),
    [
        (
            {"since": "2026-10-02"},
            lambda h: h.ts.date().isoformat() >= "2026-10-02",
            "2026-10-03-shift-handover",
        ),
        (
            {"until": "2026-10-02"},
            lambda h: h.ts.date().isoformat() <= "2026-10-02",
            "2026-09-29-output-review",
        ),
        (
            {"since": "2026-10-08", "until": "2026-10-08"},
            lambda h: h.ts.date().isoformat() == "2026-10-08",
            "2026-10-08-capacity-n11",
        ),
        (
            {"session_id": "2026-09-29-output-review"},
            lambda h: h.session_id == "2026-09-29-output-review",
            "2026-09-29-output-review",
        ),
    ],
)
def test_date_and_session_filters(sampled, filters, allowed, best):
    hits = sampled.recall("K-2 machine", k=8, **filters)
    assert hits[0].session_id == best
    assert all(allowed(h) for h in hits)


def test_role_filter(sampled):
    hits = sampled.recall("MT-4471", k=8, role="user")
    assert hits and all(h.role == "user" for h in hits)


@pytest.mark.parametrize(
    "query",
    ["-k 100", '"unbalanced', "NEAR(a b", "a OR", "*", "col:value", "'; DROP TABLE turns; --"],
)
def test_hostile_or_odd_queries_are_text(sampled, query):
    assert isinstance(sampled.recall(query), list)


def test_empty_memory_and_empty_query(memory):
    assert memory.recall("anything") == []
    assert memory.is_empty()


def test_unicode_stored_verbatim_and_found(memory, tmp_path):
    conversation(tmp_path, "ru", ["Доля брака на линии упаковки составила 2,7% в сентябре"])
    conversation(tmp_path, "ko", ["CH-294의 냉매 압력이 정상보다 낮습니다"])
    conversation(tmp_path, "emoji", ["Release party 🚀🎉 on Friday"])
    memory.index([tmp_path])
    assert memory.recall("брак упаковка", k=1)[0].session_id == "ru"
    assert memory.recall("CH-294", k=1)[0].session_id == "ko"
    assert memory.recall("냉매 압력", k=1)[0].session_id == "ko"
    hit = memory.recall("🚀 party", k=1)[0]
    assert hit.session_id == "emoji" and hit.text == "Release party 🚀🎉 on Friday"


def test_lexical_recall_before_embedding(memory, tmp_path):
    from ireneo.formats import funes_jsonl

    turns = funes_jsonl.read_file(conversation(tmp_path, "fresh", ["brand new ticket MT-9001"]))
    memory.store_turns(turns)
    assert memory.pending() == 1
    assert memory.recall("MT-9001", k=1)[0].session_id == "fresh"
    assert memory.embed_pending() == 1 and memory.pending() == 0


def test_a_fresh_memory_loads_its_model_on_the_query_worker(home, tmp_path, monkeypatch):
    """A fresh process's first recall loads the model (~0.1 s) on the worker that embeds the
    query, while the caller's thread reads the copies search holds in RAM, not before them."""
    with Memory(home) as m:
        m.index([conversation(tmp_path, "c", ["the seal on pump P-003 leaks"])])
    loaded, read = [], []

    def load(name, **options):
        loaded.append(threading.current_thread().name)
        time.sleep(0.2)  # a fresh process's load; this one's model is loaded already
        return load_embedder(name, **options)

    def vectors(store, read_copy=SQLiteStore.vectors):
        read.append(threading.current_thread().name)
        return read_copy(store)

    monkeypatch.setattr(memory_module, "load_embedder", load)
    monkeypatch.setattr(SQLiteStore, "vectors", vectors)
    with Memory(home) as fresh:
        assert fresh.recall("pump seal leak")[0].session_id == "c"
        assert len(loaded) == 1 and loaded[0].startswith("ireneo-query"), loaded
        assert read[0] == threading.current_thread().name, read
        assert len(read) == 2 and read[1].startswith("ireneo-query"), read  # and for the search
        # a warm recall does not read it ahead: a check of its counters is a query
        read.clear()
        assert fresh.recall("pump seal leak")[0].session_id == "c"
        assert len(read) == 1 and read[0].startswith("ireneo-query"), read


def test_a_warm_recall_checks_the_vectors_counters_once(memory, tmp_path, monkeypatch):
    """On PostgreSQL each check is a query; the candidate windows' cosines come from the copy
    the dense search has just brought up to date."""
    memory.index([conversation(tmp_path, "c", ["the seal on pump P-003 leaks", "MT-4471"])])
    memory.recall("pump seal leak")
    checks = []
    counters = type(memory.store)._vector_counters

    def counted(store):
        checks.append(threading.current_thread().name)
        return counters(store)

    monkeypatch.setattr(type(memory.store), "_vector_counters", counted)
    assert memory.recall("pump seal leak")[0].session_id == "c"
    assert len(checks) == 1, checks


def test_model_mismatch_is_refused_with_the_way_out(home, tmp_path):
    with Memory(home) as m:
        m.index([conversation(tmp_path, "c", ["hello there"])])
        stored = m.status().model
    other = "usem3" if stored != "usem3" else "minilm-l6-v2-int8"
    with pytest.raises(ModelMismatch) as info:
        Memory(home, model=other)
    assert f"ireneo reembed --home {home} --to {other}" in str(info.value)
    with Memory(home) as m:
        assert m.reembed(other) == 1
        assert m.status().model == other
        assert m.recall("hello", k=1)[0].session_id == "c"


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """200 generated conversations (1,200 turns): enough statistics for the relevance floor."""
    from ireneo.benchmark.generate import generate, write_funes_jsonl

    generated = generate(200, lang="en", family="A", seed=3, questions=10)
    directory = tmp_path_factory.mktemp("history")
    write_funes_jsonl(generated, directory / "src")
    with Memory(directory / "home") as memory:
        memory.index([directory / "src"])
        yield memory, generated.questions


@pytest.mark.parametrize("query", ["recipe for banana bread", "python list comprehension syntax"])
def test_an_unrelated_question_gets_no_hits(history, query):
    memory, _ = history
    assert memory.recall(query, k=8) == []  # not the nearest small talk passed off as an answer


def test_an_answered_question_gets_every_hit_asked_for(history):
    memory, questions = history
    for question in questions:
        for query in (question.long, question.short):
            sessions = [hit.session_id for hit in memory.recall(query, k=8)]
            assert question.session_id in sessions, query
            assert len(sessions) == 8, query  # never cut short: nothing relevant is per query


@pytest.mark.parametrize(
    "query", ["", "?!...,;", "what is the", "is it the", "что это было", "그것은 그", "— ? —"]
)
def test_a_query_without_content_gets_nothing(history, sampled, query):
    memory, _ = history
    assert memory.recall(query, k=8) == []
    assert sampled.recall(query, k=8) == []  # a small memory too, where every other query answers


def test_turn_windows_reads_several_ranges_at_once(memory, tmp_path):
    conversation(tmp_path, "a", ["a0", "a1", "a2", "a3"])
    conversation(tmp_path, "b", ["b0", "b1"])
    memory.index([tmp_path])
    windows = memory.store.turn_windows(
        [("b", 1, 5), ("a", None, 1), ("none", 0, 9), ("a", 2, None)]
    )
    assert [[(t.session_id, t.seq) for t in turns] for turns in windows] == [
        [("b", 1)],
        [("a", 0), ("a", 1)],
        [],
        [("a", 2), ("a", 3)],
    ]
    assert memory.store.turn_windows([]) == []
    assert [t.text for t in memory.store.get_turns("a", 1, 2)] == ["a1", "a2"]


def test_the_thing_a_question_names_decides_between_near_identical_facts(memory, tmp_path):
    # The question reads like the second fact, word for word, but names the first one's site.
    depot = "QC checked the end caps off the mixer at Carrow Depot 8: the reject rate was 5.47%."
    terminal = (
        "The quality check on the end caps from the mixer at the Carrow Terminal 8 found a "
        "reject rate of 4.1%."
    )
    conversation(tmp_path, "depot", [depot])
    conversation(tmp_path, "terminal", [terminal])
    conversation(
        tmp_path, "small-talk", ["Lunch at the canteen was fine.", "The drill took an hour."]
    )
    memory.index([tmp_path])
    question = (
        "What reject rate did the quality check find on the end caps from the mixer at the "
        "Carrow Depot 8?"
    )
    assert sessions_of(memory.recall(question, k=3))[0] == "depot"
    memory.fusion = replace(memory.fusion, name_weight=0.0)  # words and meaning alone
    assert sessions_of(memory.recall(question, k=3))[0] == "terminal"


def test_a_window_ending_on_a_question_shows_the_reply(memory, tmp_path):
    def chat(session_id: str, pump: str, third: str) -> None:
        texts = ["Hi, quick one today.", f"QC looked at the caps from the pump {pump} today."]
        conversation(tmp_path, session_id, [*texts, third, "6.03% rejects, not great.", "Noted."])

    chat("asked", "P-968", "What did the numbers look like?")
    chat("told", "P-969", "The numbers came in this morning.")
    memory.index([tmp_path])
    asked = memory.recall("caps from the pump P-968", k=1)[0]
    assert (asked.session_id, asked.seq) == ("asked", 1)
    assert [c.seq for c in asked.context] == [0, 2, 3]  # the question's answer is shown
    told = memory.recall("caps from the pump P-969", k=1)[0]
    assert (told.session_id, told.seq, [c.seq for c in told.context]) == ("told", 1, [0, 2])
    assert memory.recall("caps from the pump P-968", k=1, radius=0)[0].context == []


def test_length_norm_sets_how_much_a_longer_window_is_discounted(memory, tmp_path):
    from ireneo.formats import funes_jsonl

    filler = " ".join(f"word{i}" for i in range(40))
    for session_id, text in (("short", "pump seal leak"), ("long", f"pump seal leak {filler}")):
        memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, [text])))

    def long_against_short(length_norm: float) -> float:  # lexical only: nothing is embedded
        memory.fusion = replace(memory.fusion, length_norm=length_norm)
        found = {h.session_id: h.score for h in memory.recall("pump seal leak", k=2)}
        return found["long"] / found["short"]

    kept = memory.fusion.length_norm
    assert long_against_short(0.0) == pytest.approx(1.0)  # b = 0: length does not count
    assert long_against_short(0.75) < long_against_short(kept) < 1.0  # Okapi's b discounts more


def test_a_window_counts_each_term_once(memory, tmp_path):
    """A machine named again and again in small talk does not outrank the turn that also holds
    the question's other words: a window holds a term or not."""
    from ireneo.formats import funes_jsonl

    chats = {
        "echoes": [
            "The label on pump P-253 is missing.",
            "Okay, good to know where things stand with P-253.",
            "Someone left the panel open on P-253 again.",
        ],
        "fact": ["Pump P-253 will not restart after the weekend.", "Noted.", "Thanks."],
    }
    for n in range(6):  # "restart" is common, P-253 rare: one mention of it weighs more
        chats[f"other{n}"] = [f"The printer {n} needed a restart.", "Noted.", "Thanks."]
    for session_id, texts in chats.items():
        memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))
    assert memory.recall("P-253 restart", k=1)[0].session_id == "fact"


def store_a_site_among_qc_results(memory, tmp_path) -> None:
    """A fact about a site ("site"), a QC result holding a little more of the question's words
    ("common"), and "QC" and "Terminal" in many other conversations."""
    from ireneo.formats import funes_jsonl

    chats = {
        "site": ["At the Thornbury Terminal the hose fittings showed 5.5% rejects.", "Noted."],
        "common": ["The QC reject rate for the hose fittings batch came out fine.", "Noted."],
    }
    for n in range(8):
        chats[f"qc{n}"] = [f"QC checked batch {n} of caps today.", "Noted."]
        chats[f"terminal{n}"] = [f"The Harbor Terminal {n} crew cleaned up.", "Noted."]
    for session_id, texts in chats.items():
        memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))


def test_a_rare_name_weighs_more_than_a_common_one(memory, tmp_path):
    """A question naming a common thing ("QC", in many conversations) and a rare one (a site):
    the turn holding the site outranks the one holding "QC" and a little more of the words."""
    store_a_site_among_qc_results(memory, tmp_path)
    query = "what was the QC reject rate for the hose fittings at the Thornbury Terminal"
    assert memory.recall(query, k=1)[0].session_id == "site"
    memory.fusion = replace(memory.fusion, name_weight=0.0)  # by the words alone, "QC" wins
    assert memory.recall(query, k=1)[0].session_id == "common"


def test_a_query_typed_in_lowercase_finds_the_names_as_the_memory_writes_them(memory, tmp_path):
    """An agent's or a person's query often has no capitals: "thornbury terminal" is taken for
    the name the memory writes "Thornbury Terminal", and decides as it would have capitalised."""
    store_a_site_among_qc_results(memory, tmp_path)
    query = "what was the qc reject rate for the hose fittings at the thornbury terminal"
    assert memory.recall(query, k=1)[0].session_id == "site"
    assert memory.recall(query.capitalize(), k=1)[0].session_id == "site"  # a phone's capital
    # A query that writes its names in capitals is taken at its word: here it names only QC.
    assert memory.recall(query.replace("qc", "QC"), k=1)[0].session_id == "common"


def store_a_korean_site_among_bearing_tickets(memory, tmp_path) -> None:
    """A ticket about the Yeongwol site's mixer ("site"), told in other words than the question
    uses, among tickets at other sites that repeat the question's phrase word for word."""
    from ireneo.formats import funes_jsonl

    chats = {"site": ["영월 사업장 믹서 MX-310이 말썽이에요. 구동측 베어링 과열이 있어요.", "네."]}
    for n, site in enumerate(["파주 제2출하센터", "서산 사업장", "원주 공장", "김해 생산기지"]):
        chats[f"other{n}"] = [
            f"{site} 펌프 P-86{n}이 또 말썽이에요. 계속 올라가는 베어링 온도 때문에 "
            f"티켓 MT-569{n}를 끊었어요.",
            "네.",
        ]
    for n in range(6):  # the Yeongwol site in small talk: a site recurs
        chats[f"talk{n}"] = [f"영월 사업장 근처에 새 식당이 생겼대요. {n}번째 이야기예요.", "네."]
    for session_id, texts in chats.items():
        memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))


def test_a_korean_question_finds_its_site_by_morphemes_and_names(memory, tmp_path):
    """Korean attaches particles to words ("믹서의") and has no capitals: read by morphemes, with
    its proper nouns as names, the question finds the mixer at the site it names, not the
    tickets that share its phrase."""
    store_a_korean_site_among_bearing_tickets(memory, tmp_path)
    assert memory.hangul == "morphemes" and memory.store.get_meta("hangul") == "morphemes"
    query = "영월 사업장 믹서의 베어링 온도 상승 때문에 발행한 작업지시 좀 찾아 줄래요?"
    assert memory.recall(query, k=1)[0].session_id == "site"


def test_a_memory_written_before_korean_morphemes_keeps_reading_korean_by_bigrams(memory, tmp_path):
    """Its stored terms are bigrams ("사업", "업장"), so its queries' terms are too: by
    morphemes, "사업장" would find nothing there."""
    memory.store.set_meta("hangul", "bigrams")  # as a memory from before records it
    store_a_korean_site_among_bearing_tickets(memory, tmp_path)
    memory.store.set_meta("hangul", "")  # and as it was, with no record at all
    if memory.home:
        reopened = Memory(memory.home)
    else:
        reopened = Memory(database=memory.store._pool, user=memory.store.user)
    with reopened:
        assert reopened.hangul == "bigrams"  # it holds turns, so it is an old one
        hits = reopened.recall("사업장 믹서 구동측", k=1)
        assert hits and hits[0].session_id == "site"
        layout, stats = reopened.store.layout(), reopened.store.term_stats(["사업장"])
        assert not len(search.keyword_candidates(layout, stats, ["사업장"], 5, Filters()))


def test_a_name_written_with_a_number_after_it_is_another_place(memory, tmp_path, monkeypatch):
    """ "the Riverside Plant 2" is not the "Riverside Plant" a question names, though it holds
    its words: a window that writes the name only with a number after it loses the name's
    share, so the one about the Riverside Plant wins over three that share more words."""
    from ireneo import search
    from ireneo.formats import funes_jsonl

    chats = {
        "plain": [
            "Management approved DR-3092: we stop patching the conveyor CV-239 at the "
            "Riverside Plant and replace it.",
            "Noted.",
        ]
    }
    for n in range(3):
        chats[f"numbered{n}"] = [
            f"Settled for the conveyor CV-90{n} at the Riverside Plant 2: the decision is to "
            "repair, not replace.",
            "Noted.",
        ]
    for n in range(6):  # the rest of the memory
        chats[f"talk{n}"] = [f"Lunch at the canteen was fine today, number {n}.", "Noted."]
    for session_id, texts in chats.items():
        memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))
    memory.embed_pending()
    query = "Riverside Plant conveyor replace vs repair decision"
    assert memory.recall(query, k=1)[0].session_id == "plain"
    assert memory.recall(query.lower(), k=1)[0].session_id == "plain"  # its names from memory
    # A question that names the numbered one is answered by it.
    assert memory.recall("Riverside Plant 2 conveyor repair decision", k=1)[0].session_id != "plain"
    monkeypatch.setattr(search, "NAME_CHECK_DEPTH", 0)  # without reading the texts
    assert memory.recall(query, k=1)[0].session_id != "plain"


def test_a_question_about_a_person_finds_the_turns_they_speak(memory, tmp_path):
    """In a chat between people the speaker is the turn's role: "What did Caroline start?"
    asks about Caroline's turns, which do not write her name; the turn that says it to her does."""
    from ireneo.formats import funes_jsonl

    chats = {  # the same words, said by Melanie in one chat and by Caroline in the other
        "a-melanie": [("Melanie", "I started a pottery class last week."), ("John", "Fun!")],
        "b-caroline": [("Caroline", "I started a pottery class last week."), ("John", "Fun!")],
        "greeting": [("Melanie", "Hi Caroline, how was the weekend?"), ("Caroline", "Quiet.")],
    }
    for n in range(6):
        chats[f"other{n}"] = [("Melanie", f"The bus {n} was late again."), ("John", "Oh no.")]
    for session_id, said in chats.items():
        lines = [turn_line(session_id, i, text, role=role) for i, (role, text) in enumerate(said)]
        path = write_jsonl(tmp_path / f"{session_id}.funes.jsonl", lines)
        memory.store_turns(funes_jsonl.read_file(path))
    query = "When did Caroline start a pottery class?"
    assert memory.recall(query, k=1)[0].session_id == "b-caroline"
    memory.fusion = replace(memory.fusion, speakers=False)  # by the text alone
    assert memory.recall(query, k=1)[0].session_id != "b-caroline"


@pytest.mark.parametrize(
    "when",
    ["on 12 March 2026", "on March 12, 2026", "on 2026-03-12", "12 марта 2026", "2026년 3월 12일"],
)
def test_a_question_naming_a_day_finds_what_was_said_that_day(memory, tmp_path, when):
    """The tool takes only a query: a question about a time says it in words, and the windows
    said then rank first (ireneo.periods), here against a closer wording said another day."""
    conversation(
        tmp_path, "early", ["We decided to replace the pump seal on line 4."], "2026-03-05"
    )
    conversation(
        tmp_path, "late", ["We decided to replace the bearing of that pump."], "2026-03-12"
    )
    conversation(tmp_path, "later", ["The pump seal arrived."], "2026-04-12")
    for n in range(6):
        conversation(tmp_path, f"other{n}", [f"The bus {n} was late again."], f"2026-03-1{n}")
    memory.index([tmp_path])
    query = f"What did we decide to replace on the pump {when}?"
    assert memory.recall(query, k=1)[0].session_id == "late"
    memory.fusion = replace(memory.fusion, time_weight=0.0)  # by the words alone
    assert memory.recall(query, k=1)[0].session_id == "early"
    memory.fusion = replace(memory.fusion, time_weight=search.Fusion().time_weight)
    # a month names its every day; a time outside the memory changes nothing
    assert memory.recall("pump seal decision in April 2026", k=1)[0].session_id == "later"
    assert (
        memory.recall("What did we decide to replace on the pump in 2019?", k=1)[0].session_id
        == "early"
    )


def _chat(tmp_path, session_id: str, texts: list[str]) -> None:
    conversation(tmp_path, session_id, texts)


def _shown(hit) -> list[int]:
    return sorted([hit.seq, *(c.seq for c in hit.context)])


def test_short_turns_show_more_of_the_conversation_within_the_budget(memory, tmp_path):
    """Past ranking, a hit's context grows turn by turn, nearest first and alternating sides,
    while the whole rendered answer fits its characters: never past them (search.widen, without
    the further hits Memory.recall also shows)."""
    from ireneo.model import ContextTurn
    from ireneo.render import render_hits, within

    filler = [f"Short line number {n:02d} about lunch." for n in range(30)]
    _chat(tmp_path, "chat", [*filler[:15], "The chiller CH-7 valve was replaced.", *filler[15:]])
    _chat(tmp_path, "other", ["The boiler was fine.", "Good to hear."])
    memory.index([tmp_path])
    turns = memory.get("chat")
    plain = memory.recall("chiller CH-7 valve", k=1)
    assert plain[0].seq == 15 and len(plain[0].context) in (2, 3)
    for budget in (len(render_hits(plain)), 700, 1_000, 1_500, 4_000):
        grown = search.widen(memory.store, plain, within(budget))
        hit = grown[0]
        assert len(render_hits(grown)) <= budget  # never past the budget
        assert (hit.seq, hit.score) == (plain[0].seq, plain[0].score)  # the same ranking
        seqs = _shown(hit)
        assert set(seqs) >= set(_shown(plain[0]))
        assert seqs == list(range(seqs[0], seqs[-1] + 1))  # one run of turns
        assert abs((15 - seqs[0]) - (seqs[-1] - 15)) <= 1  # nearest first, both sides
        lo, hi = _shown(plain[0])[0] - search.REACH, _shown(plain[0])[-1] + search.REACH
        for nxt in {seqs[0] - 1, seqs[-1] + 1} & set(range(max(lo, 0), min(hi, 30) + 1)):
            # room is what stopped it, short of the reach and the conversation's ends
            more = replace(hit, context=[*hit.context, ContextTurn(nxt, "user", hit.ts, "")])
            text = turns[nxt].text
            more.context[-1] = replace(more.context[-1], role=turns[nxt].role, text=text)
            assert len(render_hits([more])) > budget
    assert len(_shown(search.widen(memory.store, plain, within(1_000))[0])) > 6
    widest = search.widen(memory.store, plain, within(100_000))[0]
    assert _shown(widest)[0] == _shown(plain[0])[0] - search.REACH  # as far as it reads
    assert _shown(widest)[-1] == _shown(plain[0])[-1] + search.REACH


def test_long_turns_give_the_answer_of_before(memory, tmp_path):
    from ireneo.render import render_hits, within

    long = ["A long turn about the weather and the train. " * 12 for _ in range(8)]
    _chat(tmp_path, "long-chat", [*long[:4], "The chiller CH-7 valve was replaced.", *long[4:]])
    memory.index([tmp_path])
    plain = memory.recall("chiller CH-7 valve", k=1)
    budget = len(render_hits(plain)) + 500  # room, but less than a neighbour's 600 characters
    assert memory.recall("chiller CH-7 valve", k=1, fits=within(budget)) == plain
    too_small = within(len(render_hits(plain)) - 1)  # today's answer is already cut: unchanged
    assert memory.recall("chiller CH-7 valve", k=1, fits=too_small) == plain


def test_a_turn_beside_a_better_hit_is_not_shown_again(memory, tmp_path):
    from ireneo.render import render_hits, within

    texts = [f"Small talk {n}." for n in range(20)]
    texts[5] = "The chiller CH-7 valve leaked on Monday."
    texts[10] = "The chiller CH-7 valve was replaced on Friday."
    _chat(tmp_path, "chat", texts)
    memory.index([tmp_path])
    plain = memory.recall("chiller CH-7 valve", k=2)
    assert sorted(h.seq for h in plain) == [5, 10]
    grown = memory.recall("chiller CH-7 valve", k=2, fits=within(4_000))
    assert [h.seq for h in grown[:2]] == [h.seq for h in plain]
    shown = [set(_shown(h)) for h in grown]
    assert sum(map(len, shown)) == len(set().union(*shown))  # each turn once, beside the better
    assert set().union(*shown) >= set(range(6, 10))  # the turns between the two are all shown
    assert len(render_hits(grown)) <= 4_000


def test_the_tool_answer_grows_its_context_and_counts_what_it_shows(memory, tmp_path):
    from ireneo.server.tools import recall_answer, returned_turns

    filler = [f"Short line number {n} about lunch." for n in range(30)]
    _chat(tmp_path, "chat", [*filler[:15], "The chiller CH-7 valve was replaced.", *filler[15:]])
    memory.index([tmp_path])
    hits, text = recall_answer(memory, "chiller CH-7 valve", 3, 1_200)
    assert len(text) <= 1_200 and "[…" not in text
    assert len(returned_turns(hits)) > 3
    for hit in hits:  # every turn the hits hold is in the text, as the grammar prints it
        for turn in [hit, *hit.context]:
            assert f"[{turn.seq}] user:" in text or f"[{turn.seq}] assistant:" in text
    unlimited, _ = recall_answer(memory, "chiller CH-7 valve", 3, None)
    assert [_shown(h) for h in unlimited] == [_shown(h) for h in memory.recall("chiller CH-7", 3)]


def test_an_answer_with_room_shows_further_hits_while_they_fit(memory, tmp_path):
    """Past its k hits, an answer with room shows the next best hits in rank order, each with
    its context, while the whole answer fits (then the contexts grow); nothing relevant stays
    nothing, and without a budget recall gives its k."""
    from ireneo.render import render_hits, within

    for n in range(8):  # short chats, each with one turn about the chiller
        _chat(tmp_path, f"chat{n}", [f"Hi {n}.", f"The chiller CH-{n} valve leaked.", "Ok."])
    memory.index([tmp_path])
    query = "chiller valve leaked"
    ranked = memory.recall(query, k=8)
    assert len(ranked) == 8 and len(memory.recall(query, k=2)) == 2  # no budget: k hits
    shown = memory.recall(query, k=2, fits=within(100_000))
    assert [(h.session_id, h.seq) for h in shown] == [(h.session_id, h.seq) for h in ranked]
    tight = within(len(render_hits(ranked[:3])))  # room for one more hit, not a fourth
    assert [h.session_id for h in memory.recall(query, k=2, fits=tight)] == sessions_of(ranked[:3])
    for budget in (len(render_hits(ranked[:2])), 600, 1_000, 4_000):
        answer = memory.recall(query, k=2, fits=within(budget))
        assert sessions_of(answer[:2]) == sessions_of(ranked[:2])  # the k come first, as ranked
        assert len(render_hits(answer)) <= budget  # never past the budget
        assert sessions_of(answer) == sessions_of(ranked[: len(answer)])  # in rank order
        if len(answer) < 8:  # the next hit, even without its growth, did not fit
            assert len(render_hits([*answer, ranked[len(answer)]])) > budget
    assert memory.recall("?!...,;", k=2, fits=within(4_000)) == []
    assert memory.recall("what is the", k=2, fits=within(4_000)) == []


def test_the_query_s_terms_and_pairs_are_found_at_every_occurrence_in_order():
    from itertools import pairwise

    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(200):
        words = sorted(set(rng.integers(0, 40, 5).tolist()))
        pairs = {(int(a), int(b)) for a, b in rng.choice(words, (3, 2))}
        ids = words + [search._pair_id(a, b) for a, b in sorted(pairs)]
        order = np.argsort(ids)
        query = search.LexicalQuery(
            np.array(ids, dtype=np.int64)[order],
            order.astype(np.int64),  # the column of each id: its place in `ids`
            np.ones(len(ids)),
            len(words),
            np.ones(len(words), dtype=bool),
            1.0,
            10,
            [],
        )
        tokens = rng.integers(0, 60, int(rng.integers(0, 300))).astype(np.int32)
        followed = rng.random(len(tokens)) < 0.8
        where, columns = query.found(tokens, followed)
        column = {i: c for c, i in enumerate(ids)}
        expected = [(i, column[t]) for i, t in enumerate(tokens.tolist()) if t in column]
        expected += [
            (i, column[search._pair_id(a, b)])
            for i, (a, b) in enumerate(pairwise(tokens.tolist()))
            if followed[i] and search._pair_id(a, b) in column
        ]
        assert list(zip(where.tolist(), columns.tolist(), strict=True)) == expected
