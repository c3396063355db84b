"""More than one server process on one SQLite home (`ireneo serve --workers N`).

Two `ireneo serve` processes on two ports and one home stand for two workers, so that each
request goes to the process the test means (a worker is the same server, started by uvicorn);
then one `--workers 2` server loses a worker to SIGKILL under posts. Real processes, real MCP
clients, real SQLite files, the packaged model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import httpx2
import pytest
from fastmcp import Client

from ireneo.benchmark.server_process import INGEST_KEY, ServerProcess, process_tree
from ireneo.formats.gateway import parse_gateway_body
from ireneo.memory import Memory
from ireneo.server.inspect import COOKIE, Sessions
from ireneo.server.locks import HomeLock, held, run_if_due
from ireneo.server.memories import user_key
from ireneo.store.sqlite import pending_in

ENV = {"IRENEO_INDEX_DEBOUNCE": "0.05", "IRENEO_ADMIN_KEY": "admin-key-" + "0123456789" * 3}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two server processes, A and B, serving one home."""
    work = tmp_path_factory.mktemp("pair")
    servers = [
        ServerProcess(home=work / "home", env_extra=ENV, log_path=work / f"{name}.log")
        for name in "ab"
    ]
    starts = [threading.Thread(target=server.start, kwargs={"timeout": 120}) for server in servers]
    try:
        for start in starts:  # side by side: each start is mostly imports and the model
            start.start()
        for start in starts:
            start.join()
        assert all(server.health() is not None for server in servers), "a server did not start"
        yield servers
    finally:
        for server in servers:
            server.stop()


def body(user: str, conversation: str, texts: list[str]) -> dict:
    turns = [
        {
            "ts": f"2026-10-01T10:{k:02d}:00Z",
            "role": "user" if k % 2 == 0 else "assistant",
            "text": text,
        }
        for k, text in enumerate(texts)
    ]
    return {"user": user, "conversation_id": conversation, "turns": turns}


def post(server: ServerProcess, user: str, conversation: str, texts: list[str]) -> int:
    answer = httpx2.post(
        server.url + "/turns",
        json=body(user, conversation, texts),
        headers={"x-ingest-key": INGEST_KEY},
        timeout=30,
    )
    return answer.status_code


def call(server: ServerProcess, user: str, tool: str, **arguments) -> str:
    async def run() -> str:
        async with Client(f"{server.url}/mcp", auth=server.token(user), timeout=30) as client:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error
            return result.content[0].text

    return asyncio.run(run())


def recall(server: ServerProcess, user: str, query: str) -> str:
    return call(server, user, "recall_my_conversations", query=query)


def memory_dir(server: ServerProcess, user: str) -> Path:
    return server.home / "users" / user_key(user)


def wait_for_vectors(server: ServerProcess, user: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while pending_in(memory_dir(server, user)):
        assert time.monotonic() < deadline, "the turns never got their vectors"
        time.sleep(0.1)


def index_runs(*servers: ServerProcess, key: str) -> list[tuple[float, float, int]]:
    """(start, end, passages) of the user's index runs, from the servers' logs."""
    runs = []
    for server in servers:
        assert server.log_path is not None
        for line in server.log_path.read_text().splitlines():
            if '"index_run"' not in line:
                continue
            event = json.loads(line)
            if event["user_key"] != key or event.get("outcome") != "ok":
                continue
            end = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
            runs.append((end - event["ms"] / 1000, end, event["passages"]))
    return sorted(runs)


def overlapping(runs: list[tuple[float, float, int]]) -> list:
    return [(a, b) for a, b in zip(runs, runs[1:], strict=False) if b[0] < a[1]]


# -- what one process writes, the other reads at once --------------------------------------------


def test_a_post_through_one_process_is_recalled_by_keyword_through_the_other_at_once(pair):
    a, b = pair
    assert post(a, "kim", "pumps", ["Pump ZX-4411 leaks oil at the seal.", "Noted."]) == 202
    assert "ZX-4411" in recall(b, "kim", "ZX-4411")


def test_posts_to_both_get_their_vectors_and_no_user_is_indexed_twice_at_once(pair):
    a, b = pair
    for n in range(12):  # both processes index this user, with a debounce of 0.05 s
        for server, name in ((a, "a"), (b, "b")):
            texts = [f"Valve {name}{n} on line {n} hums at {n * 7} hertz.", f"Logged {name}{n}."]
            assert post(server, "lee", f"{name}-{n}", texts) == 202
    wait_for_vectors(a, "lee")
    time.sleep(0.5)  # the last run's log line
    runs = index_runs(a, b, key=user_key("lee"))
    assert overlapping(runs) == []
    with Memory(memory_dir(a, "lee")) as memory:
        status = memory.status()
    # every passage embedded once: by one process or the other, never by both
    assert sum(passages for _, _, passages in runs) == status.passages == status.embedded > 0


def test_a_forget_through_one_process_is_never_shown_by_the_other(pair):
    a, b = pair
    assert post(a, "ola", "keep", ["The boiler B-17 was serviced on Monday.", "Fine."]) == 202
    assert post(a, "ola", "gone", ["My locker code is LK-5150, keep it.", "Kept."]) == 202
    assert "LK-5150" in recall(b, "ola", "LK-5150 locker code")  # B has read its copies
    wait_for_vectors(a, "ola")
    answer = httpx2.delete(
        a.url + "/conversations/ola/gone", headers={"x-ingest-key": INGEST_KEY}, timeout=30
    )
    assert answer.status_code == 200 and answer.json()["turns"] == 2
    for query in ("LK-5150", "locker code", "what is my locker code"):
        assert "LK-5150" not in recall(b, "ola", query)
    assert "B-17" in recall(b, "ola", "boiler B-17")


def test_an_explicit_memory_deleted_through_one_process_is_never_shown_by_the_other(pair):
    a, b = pair
    stored = call(a, "pia", "store_memory", content="Pia prefers invoices by post, ref INV-88.")
    memory_id = stored.split()[-1].rstrip(".")
    assert memory_id.startswith("mem-"), stored
    assert "INV-88" in call(b, "pia", "search_memories", query="invoices by post")
    assert call(a, "pia", "delete_memory", id=memory_id) == f"Deleted memory {memory_id}."
    assert "INV-88" not in call(b, "pia", "search_memories", query="INV-88 invoices by post")


def test_a_user_deleted_through_one_process_and_posted_again_through_the_other(pair):
    a, b = pair
    assert post(b, "max", "old", ["Old note OLD-1 about the forklift.", "Ok."]) == 202
    assert "OLD-1" in recall(b, "max", "OLD-1")  # B holds the memory open
    answer = httpx2.delete(a.url + "/users/max", headers={"x-ingest-key": INGEST_KEY}, timeout=30)
    assert answer.status_code == 200
    assert not memory_dir(a, "max").exists()
    assert "OLD-1" not in recall(b, "max", "OLD-1 forklift")
    # B's post lands in the new directory, not in the file A deleted
    assert post(b, "max", "new", ["New note NEW-2 about the crane.", "Ok."]) == 202
    assert "NEW-2" in recall(a, "max", "NEW-2")
    assert "NEW-2" in recall(b, "max", "NEW-2") and "OLD-1" not in recall(b, "max", "OLD-1")


# -- the inspector's sign-ins are the home's, not a process's -------------------------------------


def is_signed_in(server: ServerProcess, cookie: str) -> bool:
    return "Sign out" in httpx2.get(server.url + "/inspect", cookies={COOKIE: cookie}).text


def test_a_sign_in_on_one_process_works_on_the_other_and_sign_out_ends_it_on_both(pair):
    a, b = pair
    answer = httpx2.post(a.url + "/inspect/sign-in", data={"token": a.token("ida")})
    assert answer.status_code == 303
    cookie = answer.cookies[COOKIE]
    assert is_signed_in(a, cookie) and is_signed_in(b, cookie)
    page = httpx2.get(b.url + "/inspect", cookies={COOKIE: cookie}).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    done = httpx2.post(b.url + "/inspect/sign-out", cookies={COOKIE: cookie}, data={"csrf": csrf})
    assert done.status_code == 303
    assert not is_signed_in(a, cookie) and not is_signed_in(b, cookie)


def test_sessions_in_one_file_are_shared_and_bounded(tmp_path):
    now = [1000.0]
    first = Sessions(lambda: now[0], path=tmp_path / "s.sqlite", per_user=2)
    second = Sessions(lambda: now[0], path=tmp_path / "s.sqlite", per_user=2)
    ids = [first.start("u", False, 2000.0)[0] for _ in range(3)]
    assert [second.get(i) is not None for i in ids] == [False, True, True]
    second.end(ids[2])
    assert first.get(ids[2]) is None and first.count("u") == 1
    now[0] = 2000.0
    assert second.get(ids[1]) is None and len(first) == 0
    assert oct((tmp_path / "s.sqlite").stat().st_mode & 0o777) == "0o600"


# -- locks between processes ----------------------------------------------------------------------


def test_a_lock_is_held_against_others_and_let_go_when_its_process_dies(tmp_path):
    path = tmp_path / "locks" / "index-x"
    with held(path) as mine:
        assert mine
        with held(path) as again:  # another open of it, as another process would
            assert not again
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from ireneo.server.locks import HomeLock;"
            "assert HomeLock(Path(sys.argv[1])).acquire(); print('held', flush=True); "
            "time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with held(path) as mine:
            assert not mine
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        with held(path) as mine:
            assert mine
    finally:
        holder.kill()
        holder.wait(10)


def test_a_periodic_job_runs_once_per_interval_for_the_whole_home(tmp_path):
    runs = []
    now = [10_000.0]
    path = tmp_path / "job-expiry"

    def job() -> None:
        runs.append(now[0])

    def ask() -> bool:  # one process's turn
        return run_if_due(HomeLock(path), 60, job, clock=lambda: now[0])

    assert ask() and not ask()  # the second process, a moment later: done already
    now[0] += 30
    assert not ask()
    now[0] += 30
    assert ask()
    busy = HomeLock(path)
    assert busy.acquire()  # a process in the middle of a run
    now[0] += 60
    assert not ask()
    busy.release()
    assert ask() and len(runs) == 3


# -- uvicorn's workers: one dies, another takes its place, nothing acknowledged is lost ------------


def workers_of(server: ServerProcess) -> set[int]:
    assert server.process is not None
    return {
        pid
        for pid in process_tree(server.process.pid)[1:]
        if "resource_tracker"
        not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="ignore")
    }


def sockets_of(pid: int) -> set[int]:
    """The inodes of the sockets a process holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def tcp_sockets(port: int, state: str) -> set[int]:
    """The inodes of this machine's TCP sockets on local `port` in `state` (0A listening, 01
    established), from /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == state:
                    found.add(int(fields[9]))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="SO_REUSEPORT deals connections on Linux")
def test_each_worker_listens_on_its_own_socket_and_connections_reach_both(tmp_path):
    """With one socket shared by the workers, most kept-alive connections went to one process
    (96% of a core against 13%); each worker binds the port itself, so the kernel deals them."""
    server = ServerProcess(
        home=tmp_path / "home", env_extra=ENV, log_path=tmp_path / "w.log", args=("--workers", "2")
    )
    server.start(timeout=120)
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 120
        while len(workers := workers_of(server)) < 2 or not all(
            sockets_of(pid) & tcp_sockets(server.port, "0A") for pid in workers
        ):
            assert time.monotonic() < deadline, "the workers never listened"
            time.sleep(0.2)
        listening = tcp_sockets(server.port, "0A")
        assert len(listening) == 2 and all(len(sockets_of(pid) & listening) == 1 for pid in workers)
        for _ in range(16):  # all on one worker by chance: 2 in 65,536
            client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            client.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.recv(100).startswith(b"HTTP/1.1 200")
            clients.append(client)
        established = tcp_sockets(server.port, "01")
        served = {pid: len(sockets_of(pid) & established) for pid in workers}
        assert sum(served.values()) == 16 and all(served.values()), served
    finally:
        for client in clients:
            client.close()
        server.stop()


def test_a_killed_worker_is_replaced_and_no_acknowledged_post_is_lost(tmp_path):
    home = tmp_path / "home"
    # turns waiting for vectors before the server starts: both workers' catch-up see them
    for user in ("u0", "u1", "u2"):
        with Memory(home / "users" / user_key(user)) as memory:
            for n in range(20):
                texts = [f"Earlier note E-{n} of {user} about pump {n}.", "Ok."]
                memory.store_turns(parse_gateway_body(body(user, f"early-{n}", texts))[2])
    server = ServerProcess(
        home=home,
        env_extra=ENV | {"IRENEO_READ_TIMEOUT": "1"},
        log_path=tmp_path / "w.log",
        args=("--workers", "2"),
    )
    server.start(timeout=120)
    acked: list[tuple[str, str]] = []
    stop = threading.Event()

    def keep_posting() -> None:
        n = 0
        while not stop.is_set():
            user, conversation = f"u{n % 3}", f"c{n}"
            try:
                if post(server, user, conversation, [f"Note N-{n} on line {n}.", "Ok."]) == 202:
                    acked.append((user, conversation))
            except httpx2.HTTPError:
                pass  # not acknowledged: may be lost
            n += 1

    poster = threading.Thread(target=keep_posting)
    try:
        deadline = time.monotonic() + 120
        while len(workers_of(server)) < 2:
            assert time.monotonic() < deadline, "the second worker never started"
            time.sleep(0.2)
        # each worker keeps the read deadline of the settings (its protocol class is named, not made)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as stalled:
            stalled.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finished
            started = time.monotonic()
            assert stalled.recv(100).startswith(b"HTTP/1.1 408")
            assert time.monotonic() - started < 5
        before = workers_of(server)
        poster.start()
        time.sleep(1.0)
        victim = sorted(before)[0]
        os.kill(victim, signal.SIGKILL)
        while victim in workers_of(server) or len(workers_of(server)) < 2:
            assert time.monotonic() < deadline, "the dead worker was not replaced"
            time.sleep(0.2)
        if sys.platform == "linux":  # the replacement serves, on a socket of its own
            while not all(
                sockets_of(pid) & tcp_sockets(server.port, "0A") for pid in workers_of(server)
            ):
                assert time.monotonic() < deadline, "the replacement never listened"
                time.sleep(0.2)
        stop.set()
        poster.join(30)
        assert "N-" in recall(server, "u1", "Note on line")
        for user in ("u0", "u1", "u2"):
            wait_for_vectors(server, user)
    finally:
        stop.set()
        server.stop()
    assert len(acked) > 10
    for user in ("u0", "u1", "u2"):
        with Memory(home / "users" / user_key(user)) as memory:
            stored = {s.session_id for s in memory.sessions()}
            mine = {c for u, c in acked if u == user}
            assert mine <= stored, sorted(mine - stored)[:5]
            assert memory.pending() == 0
        assert overlapping(index_runs(server, key=user_key(user))) == []


def test_a_user_locked_by_another_process_is_indexed_once_the_lock_is_let_go(tmp_path):
    from ireneo.server.indexer import Indexer
    from ireneo.server.locks import HomeLocks
    from ireneo.server.memories import OpenMemories

    home = tmp_path / "home"
    key = user_key("ana")
    with Memory(home / "users" / key) as memory:
        memory.store_turns(parse_gateway_body(body("ana", "talk", ["Pump P-7 rattles.", "Ok."]))[2])
    locks = HomeLocks(home)
    other = locks.index(key)  # another process, indexing this user
    assert other.acquire()
    registry = OpenMemories(home / "users")

    async def scenario() -> tuple[int, int, int]:
        indexer = Indexer(registry, debounce=0.02, locks=locks)
        indexer.schedule(key)
        await asyncio.sleep(0.3)
        put_off, pending = indexer.elsewhere, pending_in(home / "users" / key)
        other.release()
        await indexer.wait_idle(60)
        await indexer.stop()
        return put_off, pending, indexer.runs[key]

    try:
        put_off, pending, runs = asyncio.run(scenario())
    finally:
        other.release()
        registry.close_all()
    assert put_off >= 2 and pending == 2  # tried again each debounce, nothing done meanwhile
    assert runs == 1 and pending_in(home / "users" / key) == 0
