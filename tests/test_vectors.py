"""The in-memory vector index both stores search: 8-bit codes, cosines close to the float ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ireneo.embed import load_embedder
from ireneo.store import vectors
from ireneo.store.vectors import VectorIndex


def unit_rows(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_cosines_are_within_a_few_thousandths_of_the_float_ones() -> None:
    rows, query = unit_rows(5000), unit_rows(1, seed=1)[0]
    index = VectorIndex().extended(enumerate(rows, 1))
    exact = rows @ query

    got = dict(index.nearest(query, 5000))
    assert len(got) == 5000
    approx = np.array([got[i] for i in range(1, 5001)])
    assert np.abs(approx - exact).max() < 0.01
    some = [7, 4999, 12]
    assert np.allclose(index.cosines_of(query, np.array(some)), exact[[6, 4998, 11]], atol=0.01)


def test_the_nearest_of_real_sentences_are_the_float_search_s() -> None:
    embedder = load_embedder()
    texts = [f"ticket MT-{1000 + i} was opened for the pump at site {i % 17}" for i in range(300)]
    texts += ["the seal on pump P-003 leaks and a work order was raised", "lunch on Friday"]
    rows = embedder.embed_passages(texts)
    index = VectorIndex().extended(enumerate(rows, 1))
    query = embedder.embed_query("which work order was raised for the leaking seal on P-003")

    exact = np.argsort(-(rows @ query), kind="stable")[:10] + 1
    found = [pid for pid, _ in index.nearest(query, 10)]
    assert found[0] == exact[0] == len(texts) - 1
    assert len(set(found) & set(exact.tolist())) >= 9


def test_a_filter_an_empty_index_and_missing_ids() -> None:
    assert VectorIndex().nearest(unit_rows(1)[0], 5) == []
    assert np.isnan(VectorIndex().cosines_of(unit_rows(1)[0], np.array([1, 2]))).all()
    rows = unit_rows(10)
    index = VectorIndex().extended(enumerate(rows, 10))
    only = index.nearest(rows[3], 5, allowed=np.array([13, 15, 99]))
    assert [pid for pid, _ in only][0] == 13 and {pid for pid, _ in only} == {13, 15}
    held = ~np.isnan(index.cosines_of(rows[0], np.array([10, 11, 5, 25])))
    assert held.tolist() == [True, True, False, False]
    assert index.nearest(rows[0], 0) == []


def test_extending_leaves_the_index_a_search_already_holds() -> None:
    rows = unit_rows(20)
    first = VectorIndex().extended(enumerate(rows[:10], 1))
    second = first.extended(enumerate(rows[10:], 11))
    assert len(first) == 10 and first.last_id == 10
    assert len(second) == 20 and second.last_id == 20
    assert first.nearest(rows[15], 1)[0][0] != 16  # the first index never sees the new rows
    assert second.nearest(rows[15], 1)[0][0] == 16
    assert first.extended([]) is first


def test_cosines_of_a_query_are_what_its_search_computed() -> None:
    rows = unit_rows(5000)
    index = VectorIndex().extended(enumerate(rows, 1))
    query, other = rows[7], rows[8]
    ids = np.arange(1, 5001)
    before = index.cosines_of(query, ids)  # no search yet: computed from the codes
    found = index.nearest(query, 10)
    assert np.array_equal(index.cosines_of(query, ids), before)  # now looked up, to the bit
    assert all(before[pid - 1] == cosine for pid, cosine in found)
    index.nearest(other, 10)  # another query's search replaces what is kept
    assert np.array_equal(index.cosines_of(query, ids), before)
    assert np.abs(before - rows @ query).max() < 0.01


def test_the_median_cosine_is_the_same_before_and_after_a_search() -> None:
    """After a search the median is read from its cosines by position, without looking the
    sample's ids up: the same float to the bit as computed from the codes."""
    for n in (3, 5000, 9000):  # samples of every vector, every vector, every second one
        rows = unit_rows(n, seed=n)
        index = VectorIndex().extended(enumerate(rows, 1))
        for query in rows[:3]:
            before = index.median_cosine(query)  # no search of this query kept
            sample = index.ids[:: max(1, n // 4096)]
            assert before == float(np.median(index.cosines_of(query, sample)))
            index.nearest(query, 10)
            assert index.median_cosine(query) == before


def test_the_search_graph_is_built_once_into_the_model_cache(tmp_path, monkeypatch) -> None:
    """A fresh process then loads it without importing onnx (~45 ms of its first recall)."""
    import onnxruntime as ort

    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(tmp_path / "cache"))
    built = vectors._nearest_graph()
    assert isinstance(built, bytes)
    cached = vectors._nearest_graph()
    assert isinstance(cached, str) and Path(cached).read_bytes() == built
    assert Path(cached).stat().st_mode & 0o044 == 0o044  # another user (an image's) reads it
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [Path(cached).name]

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(blocker / "cache"))
    assert vectors._nearest_graph() == built  # an unwritable cache: built in this process

    rows, query = unit_rows(50, 8), unit_rows(1, 8, seed=3)[0]
    index = VectorIndex().extended(enumerate(rows, 1))
    session = ort.InferenceSession(cached, providers=["CPUExecutionProvider"])
    monkeypatch.setattr(vectors, "_session", session)
    assert [pid for pid, _ in index.nearest(query, 3)] == (
        np.argsort(-(rows @ query))[:3] + 1
    ).tolist()
