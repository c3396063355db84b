"""Overload and faults on a real server: a flood of posts is refused with 429 and drains; a flood
of recalls gets answers, the fail-soft sentence or the busy one; a full database or disk gets
507 with nothing half stored while recall still answers, and the server takes writes again, and
indexes them, once space is back; a model that cannot load gives fail-soft answers, a clear log line, and works once
the model is there. Never a 5xx other than those, never a hang, never a restart.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import pytest

from ireneo.server.memories import user_key
from ireneo.server.slots import BUSY
from ireneo.server.tools import NO_MEMORY, UNAVAILABLE
from tests.conftest_models import minilm_dir
from tests.conftest_server import (
    INGEST_KEY,
    RunningServer,
    conversation,
    make_settings,
    wait_for,
)


def post_alone(url: str, body: dict) -> httpx2.Response:
    """A post on a connection of its own (for many at once from threads)."""
    with httpx2.Client(base_url=url, timeout=30) as http:
        return http.post("/turns", json=body, headers={"x-ingest-key": INGEST_KEY})


def events(caplog, name: str) -> list[dict]:
    return [
        getattr(r, "ireneo_fields", {}) | {"level": r.levelname}
        for r in caplog.records
        if r.msg == name and hasattr(r, "ireneo_fields")
    ]


# -- overload ---------------------------------------------------------------------------------


def test_an_ingest_flood_is_refused_with_429_and_the_server_recovers(tmp_path):
    srv = RunningServer(make_settings(tmp_path, ingest_concurrency=1, ingest_queue=3))
    try:
        ingest = srv.state.ingest
        real, gate = ingest._store, threading.Event()

        def held(key, turns):
            gate.wait(20)
            return real(key, turns)

        ingest._store = held
        bodies = [
            conversation(f"flood-{n}", [f"Flood turn FL-{n}."], user="fay") for n in range(12)
        ]
        with ThreadPoolExecutor(12) as pool:
            futures = [pool.submit(post_alone, srv.url, body) for body in bodies]
            wait_for(lambda: ingest.refused >= 9)
            health = srv.http.get("/health", timeout=5)  # the server still answers at once
            assert health.status_code == 200
            gate.set()
            responses = [future.result(30) for future in futures]
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [202] * 3 + [429] * 9
        for body, response in zip(bodies, responses, strict=True):
            stored = srv.stored_turns("fay", body["conversation_id"])
            if response.status_code == 429:
                assert response.headers["retry-after"] == "1"
                assert "too many ingest requests" in response.json()["error"]
                assert stored == []  # refused: nothing stored
            else:
                assert [t.text for t in stored] == [body["turns"][0]["text"]]
        # the flood is over: posts go through again, refused ones can be sent again
        for body, response in zip(bodies, responses, strict=True):
            if response.status_code == 429:
                assert srv.post(body).status_code == 202
        assert ingest.admitted == 0
    finally:
        srv.close()


def test_a_recall_flood_gets_answers_or_the_fail_soft_sentence_and_recovers(tmp_path):
    srv = RunningServer(make_settings(tmp_path, recall_concurrency=1, recall_timeout=0.5))
    try:
        assert srv.post(conversation("c-r", ["Pump PR-9 report."], user="rick")).status_code == 202
        recaller = srv.state.recaller
        real = recaller._recall_sync

        def slow(lease, query):
            time.sleep(0.25)
            return real(lease, query)

        recaller._recall_sync = slow
        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(srv.recall, "rick", "PR-9") for _ in range(10)]
            assert srv.http.get("/health", timeout=5).status_code == 200
            answers = [future.result(30) for future in futures]
        # one running, four waiting (FairSlots' queue for one user), the rest told at once
        assert all("PR-9" in a or a in (UNAVAILABLE, BUSY) for a in answers)
        assert BUSY in answers and any("PR-9" in a for a in answers)
        assert srv.state.calls.peak == 1
        recaller._recall_sync = real
        wait_for(lambda: srv.state.calls.active == 0)
        assert "PR-9" in srv.recall("rick", "PR-9")
    finally:
        srv.close()


# -- a full database --------------------------------------------------------------------------


def cap_database(srv: RunningServer, user: str, pages: int | None) -> None:
    """Limit the user's database to its current size (None: lift the limit), as a full disk
    would: SQLite answers the next write that needs a page with "database or disk is full"."""
    with srv.state.registry.lease(user_key(user), create=False) as memory:
        db = memory.store._db
        limit = db.execute("PRAGMA page_count").fetchone()[0] if pages is None else pages
        db.execute(f"PRAGMA max_page_count = {limit}")


def test_a_full_database_gets_507_with_nothing_half_stored_and_recovers(tmp_path, caplog):
    srv = RunningServer(make_settings(tmp_path, max_body_bytes=4 * 1024 * 1024))
    try:
        first = conversation("c-first", ["Boiler B-12 inspection is booked."], user="dana")
        assert srv.post(first).status_code == 202
        srv.wait_indexed()
        cap_database(srv, "dana", None)
        big = conversation(
            "c-big", [f"Turn {i}: valve VB-{i} " + "log " * 200 for i in range(5)], user="dana"
        )
        grown = conversation(
            "c-first", [*(t["text"] for t in first["turns"]), "An edit."], user="dana"
        )
        with caplog.at_level(logging.INFO):
            for body in (big, grown):
                response = srv.post(body)
                assert response.status_code in (202, 507)
            response = srv.post(big)
        assert response.status_code == 507
        assert "storage full" in response.json()["error"]
        assert srv.stored_turns("dana", "c-big") == []  # nothing half stored
        assert "B-12" in srv.recall("dana", "B-12 inspection")  # recall still answers
        assert any(e.get("reason") == "storage_full" for e in events(caplog, "store_failed"))
        # space is back: the same post goes through, without a restart
        cap_database(srv, "dana", 2**30)
        assert srv.post(big).status_code == 202
        assert len(srv.stored_turns("dana", "c-big")) == 5
        srv.wait_indexed()
        with srv.state.registry.lease(user_key("dana"), create=False) as memory:
            assert memory.pending() == 0
    finally:
        srv.close()


def test_indexing_on_a_full_database_is_tried_again_until_space_is_back(tmp_path, caplog):
    srv = RunningServer(make_settings(tmp_path, index_debounce=0.3))
    try:
        srv.state.indexer.full_retry = 0.2
        body = conversation("c-idx", [f"Chiller CH-{i} alarm log." for i in range(40)], user="ivo")
        with caplog.at_level(logging.INFO):
            assert srv.post(body).status_code == 202
            cap_database(srv, "ivo", None)  # before the index run: its vectors will not fit
            wait_for(lambda: srv.state.indexer.failures[user_key("ivo")] >= 2)
            assert "CH-7" in srv.recall("ivo", "CH-7 alarm")  # keyword recall meanwhile
            cap_database(srv, "ivo", 2**30)
            srv.wait_indexed()
        outcomes = [e.get("outcome") for e in events(caplog, "index_run")]
        assert "storage_full" in outcomes and outcomes[-1] == "ok"
        with srv.state.registry.lease(user_key("ivo"), create=False) as memory:
            assert memory.pending() == 0
    finally:
        srv.close()


# -- a full disk ------------------------------------------------------------------------------


@contextlib.contextmanager
def tiny_disk(path: Path, size: str = "6m"):
    """A tmpfs of `size` mounted at `path` (root only); skips the test where that is impossible."""
    path.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a tiny filesystem needs root and mount")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> Path:
    """Write into `path` until the filesystem is full; the filler file."""
    filler = path / "filler"
    with filler.open("wb", buffering=0) as out:
        for size in (65536, 4096, 512):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    return filler


def test_a_full_disk_gets_507_recall_answers_and_ingest_recovers_without_restart(tmp_path):
    with tiny_disk(tmp_path / "disk") as disk:
        srv = RunningServer(make_settings(disk / "home", max_body_bytes=4 * 1024 * 1024))
        try:
            first = conversation("c-1", ["Press PX-4 lubrication is due."], user="ella")
            assert srv.post(first).status_code == 202
            srv.wait_indexed()
            filler = fill(disk)
            big = conversation(
                "c-2", [f"Turn {i}: " + "pressure log " * 300 for i in range(20)], user="ella"
            )
            response = srv.post(big)
            assert response.status_code == 507, response.text
            assert srv.stored_turns("ella", "c-2") == []
            newcomer = srv.post(conversation("c-n", ["hello"], user="newcomer"))
            assert newcomer.status_code == 507, newcomer.text
            assert "PX-4" in srv.recall("ella", "PX-4 lubrication")
            assert srv.recall("newcomer", "hello") == NO_MEMORY
            filler.unlink()
            assert srv.post(big).status_code == 202
            assert srv.post(conversation("c-n", ["hello"], user="newcomer")).status_code == 202
            assert len(srv.stored_turns("ella", "c-2")) == 20
            assert "hello" in srv.recall("newcomer", "hello")
        finally:
            srv.close()


# -- a model that cannot load -----------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_model_that_cannot_load_fails_soft_and_recovers_once_it_can(tmp_path, caplog, damage):
    model = tmp_path / "model"
    if damage == "corrupt":
        minilm_dir(model, nested=False)
        (model / "model.onnx").write_bytes(b"not an onnx model")
    with caplog.at_level(logging.INFO):
        srv = RunningServer(make_settings(tmp_path / "home", model=str(model)))
    try:
        wait_for(lambda: events(caplog, "model_unavailable"))
        line = events(caplog, "model_unavailable")[0]
        assert line["level"] == "ERROR" and line["error"] == "UnknownModel"
        body = conversation("c-m", ["Turbine TB-3 overhaul planned."], user="mo")
        with caplog.at_level(logging.INFO):
            response = srv.post(body)
        assert response.status_code == 503
        assert "embedding model cannot load" in response.json()["error"]
        assert any(e.get("reason") == "model_unavailable" for e in events(caplog, "store_failed"))
        assert srv.stored_turns("mo", "c-m") == []
        assert srv.recall("mo", "TB-3") in (NO_MEMORY, UNAVAILABLE)  # a sentence, not an error
        # the model appears: the next post works, without a restart
        shutil.rmtree(model, ignore_errors=True)
        minilm_dir(model, nested=False)
        assert srv.post(body).status_code == 202
        srv.wait_indexed()
        assert "TB-3" in srv.recall("mo", "TB-3 overhaul")
    finally:
        srv.close()


def test_settings_for_ingest_admission(tmp_path):
    from ireneo.config import Settings

    env = {"IRENEO_INGEST_CONCURRENCY": "2", "IRENEO_INGEST_QUEUE": "9"}
    settings = Settings.from_env(env)
    assert (settings.ingest_concurrency, settings.ingest_queue) == (2, 9)
    assert json.dumps(Settings().ingest_queue) == "64"
