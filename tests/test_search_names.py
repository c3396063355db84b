"""The names a query typed without capitals takes from the memory (search.names_in_memory),
read once per turn and kept with the layout: what is kept must follow every write."""

from ireneo import search
from ireneo.analyze import query_terms, terms
from ireneo.formats import funes_jsonl
from ireneo.store import Filters
from tests.conftest import conversation, turn_line, write_jsonl


def names_for(memory, query: str) -> list[list[str]]:
    """names_in_memory as window_scores asks it, on the memory as it is now."""
    store, filters, words = memory.store, Filters(), query_terms(query)
    stats = store.term_stats(words)  # first, as window_scores reads them
    layout = store.layout()
    rarer = search.selective(words, stats)
    seeds = search.keyword_candidates(layout, stats, rarer, search.CANDIDATES, filters)
    return search.names_in_memory(store, layout, query, terms(query), rarer, seeds, filters)


def store(memory, tmp_path, session_id: str, texts: list[str]) -> None:
    memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))


def test_names_are_the_same_when_read_and_when_kept(memory, tmp_path):
    store(memory, tmp_path, "site", ["At the Thornbury Terminal the caps showed rejects.", "Ok."])
    store(memory, tmp_path, "other", ["The Harbor Terminal crew met Thornbury folk.", "Ok."])
    query = "what were the rejects at the thornbury terminal"
    first = names_for(memory, query)
    assert first == [["thornburi", "termin"]]
    assert memory.store.layout().written  # the turns read are kept
    assert names_for(memory, query) == first


def test_a_name_stored_after_the_turns_were_kept_is_found(memory, tmp_path):
    store(memory, tmp_path, "a", ["The caps from the mixer were fine.", "Ok."])
    query = "caps from the carrow depot mixer"
    assert names_for(memory, query) == []
    store(memory, tmp_path, "b", ["The caps from the Carrow Depot mixer failed.", "Ok."])
    assert names_for(memory, query) == [["carrow", "depot"]]


def test_a_turn_stored_at_a_kept_place_is_read_again(memory, tmp_path):
    """Two turns may share a conversation and a seq: the second one's name is found though the
    first was kept for that place."""
    store(memory, tmp_path, "a", ["The caps from the mixer were fine.", "Ok."])
    query = "caps from the carrow depot mixer"
    assert names_for(memory, query) == []
    again = turn_line("a", 0, "Correction: the caps from the Carrow Depot mixer.", uuid="a-0b")
    memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "again.funes.jsonl", [again])))
    assert names_for(memory, query) == [["carrow", "depot"]]


def test_a_forgotten_or_edited_turn_gives_no_name(memory, tmp_path):
    store(memory, tmp_path, "a", ["The caps from the Carrow Depot mixer failed.", "Ok."])
    store(memory, tmp_path, "b", ["The mixer at Selby Works is new.", "Ok."])
    query = "caps from the carrow depot mixer at selby works"
    assert names_for(memory, query) == [["carrow", "depot"], ["selbi", "work"]]
    memory.forget("a")
    assert names_for(memory, query) == [["selbi", "work"]]
    store(memory, tmp_path, "b", ["The mixer at the new works is fine.", "Ok."])  # edited
    assert names_for(memory, query) == []


def test_a_cue_without_capitals_reads_the_turns_text(memory, tmp_path):
    """A Hangul word has no capital to find it by: such a query reads the text as before."""
    store(memory, tmp_path, "a", ["영월 창고의 Carrow Depot 믹서가 고장났어요.", "네."])
    assert names_for(memory, "영월 carrow depot 믹서") == [["carrow", "depot"]]


def test_what_a_turn_marks_holds_each_capitalised_cue_it_holds():
    text = "McCarrow said: the Carrowby QC team, at Øster Works (née ßtraße), 2x O'Neil."
    marks = search._marks(text)
    for cue in ["Carrow", "Mc", "Carrowby", "QC", "C", "Øster", "Works", "Neil", "O", "Carrowb"]:
        assert cue in text and "\n" + cue in marks, cue
    for cue in ["Carrowx", "Team", "Said", "Née", "X", "Ster"]:
        assert cue not in text and "\n" + cue not in marks, cue


def test_names_are_found_while_turns_are_stored(memory, tmp_path):
    """Recalls on one layout keep names while posts grow it into the next: none fails, and the
    last name stored is found."""
    import threading

    store(memory, tmp_path, "a", ["The caps from the Carrow Depot mixer failed.", "Ok."])
    errors: list[BaseException] = []

    def recall() -> None:
        try:
            for _ in range(20):
                memory.recall("caps from the carrow depot mixer at selby works 9", k=3)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=recall) for _ in range(2)]
    for thread in threads:
        thread.start()
    for n in range(10):
        store(memory, tmp_path / str(n), f"s{n}", [f"The Selby Works {n} mixer caps.", "Ok."])
    for thread in threads:
        thread.join()
    assert not errors
    assert ["selbi", "work", "9"] in names_for(memory, "caps from the selby works 9 mixer")
