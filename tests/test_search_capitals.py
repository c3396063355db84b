"""The capitalised runs the numbered-name check reads (search._without_numbered_names), parsed
once per turn and kept with the layout: what is kept must follow every write."""

from ireneo import search
from ireneo.analyze import runs_of_capitals
from ireneo.formats import funes_jsonl
from tests.conftest import conversation, turn_line, write_jsonl


def kept_and_read(memory, session_id: str) -> tuple[list[list[str]], list[list[str]]]:
    """A conversation's runs as the check takes them (kept), and parsed from its text now."""
    turns = memory.store.turn_windows([(session_id, None, None)])[0]
    read = [run for turn in turns for run in runs_of_capitals(turn.text)]
    return search._capitals(memory.store.layout(), turns), read


def store(memory, tmp_path, session_id: str, texts: list[str]) -> None:
    memory.store_turns(funes_jsonl.read_file(conversation(tmp_path, session_id, texts)))


def test_runs_are_the_same_when_read_and_when_kept(memory, tmp_path):
    store(memory, tmp_path, "a", ["The crew at the Riverside Plant 2 left.", "Ok, Riverside."])
    kept, read = kept_and_read(memory, "a")
    assert kept == read == [["the"], ["riversid", "plant", "2"], ["ok"], ["riversid"]]
    assert len(memory.store.layout().capitals) == 2  # one entry a turn
    assert kept_and_read(memory, "a") == (read, read)


def test_a_turn_stored_at_a_kept_place_is_read_again(memory, tmp_path):
    store(memory, tmp_path, "a", ["The crew at the Riverside Plant 2 left.", "Ok."])
    kept_and_read(memory, "a")
    again = turn_line("a", 0, "Correction: the Riverside Plant crew left.", uuid="a-0b")
    memory.store_turns(funes_jsonl.read_file(write_jsonl(tmp_path / "again.funes.jsonl", [again])))
    kept, read = kept_and_read(memory, "a")
    assert kept == read
    assert ["correct"] in kept and ["riversid", "plant"] in kept


def test_a_forgotten_conversation_leaves_no_runs_kept(memory, tmp_path):
    store(memory, tmp_path, "a", ["The crew at the Riverside Plant 2 left.", "Ok."])
    store(memory, tmp_path, "b", ["The Selby Works crew stayed.", "Ok."])
    kept_and_read(memory, "a")
    kept_and_read(memory, "b")
    memory.forget("a")
    assert len(memory.store.layout().capitals) <= 2  # b's, if any: a new layout
    kept, read = kept_and_read(memory, "b")
    assert kept == read == [["the", "selbi", "work"], ["ok"]]
