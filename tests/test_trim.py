"""Giving freed heap memory back to the system (glibc's malloc_trim), at most every few seconds."""

from __future__ import annotations

import ctypes

import pytest

from ireneo.server.indexer import Indexer
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.trim import Trim, glibc_trim, resident_pages
from tests.test_registry import _turns

pytestmark = pytest.mark.skipif(glibc_trim() is None, reason="malloc_trim is glibc's")


def test_a_trim_gives_back_what_was_freed_in_small_chunks():
    """40 MB in 1 KiB chunks, freed below a chunk still in use: glibc keeps them until trimmed."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(1024) for _ in range(40 * 1024)]
    for chunk in chunks:
        ctypes.memset(chunk, 1, 1024)  # resident
    pinned = chunks.pop()  # the last one, above the rest: the heap's top cannot shrink past it
    for chunk in chunks:
        libc.free(chunk)
    before = resident_pages()
    trim = Trim(interval=3600)
    try:
        assert trim(force=True)
        assert trim.freed >= 30 * 2**20
        assert resident_pages() < before
    finally:
        libc.free(pinned)


def test_trims_are_at_most_one_per_interval():
    now = [100.0]
    trim = Trim(interval=10.0, clock=lambda: now[0])
    assert not trim()  # the interval starts when it is made
    now[0] += 10.0
    assert trim()
    now[0] += 9.9
    assert not trim()
    now[0] += 0.1
    assert trim()
    assert trim.trims == 2 and trim.cpu_seconds >= 0


def test_an_index_run_trims_the_heap_its_batches_freed(tmp_path):
    trim = Trim(interval=0.0)
    registry = OpenMemories(tmp_path / "users", capacity=8, trim=trim)
    key = user_key("a")
    with registry.lease(key, create=True) as memory:
        memory.store_turns(_turns(12))
    assert trim.trims == 0
    assert Indexer(registry).embed(key) > 0
    assert trim.trims == 1
    registry.close_all()
