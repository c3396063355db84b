"""Read deadlines, attacked with raw sockets against a real `ireneo serve` process: posts that
stall mid-body take no place in the admission queue (other posts go through while they are
held) and are answered 408 and closed; connections with half-sent or no headers, also ones
trickling a byte at a time, are closed within the deadline; a slow client inside the deadline
is served. Each test runs against both of uvicorn's HTTP/1.1 protocols the server can run on:
httptools (what `ireneo serve` runs) and h11 (what it runs where httptools is not installed).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import resource
import socket
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx2
import pytest

from ireneo.config import Settings
from ireneo.server import deadlines, processes
from ireneo.server.app import uvicorn_options
from tests.conftest_server import (
    INGEST_KEY,
    PYTHON,
    SERVER_ENV,
    conversation,
    free_port,
    start_server,
    stop_server,
    subprocess_env,
    wait_ready,
)

READ_TIMEOUT = 4.0
QUEUE = 4
SLACK = 4.0  # what a busy machine may add to a deadline
# The review held 1,000 half-sent heads open for > 30 s; as many here as the open-file limit
# leaves room for (this process and the server each hold one descriptor per connection).
HALF_SENT = min(1000, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 300) // 2)


# `ireneo serve` as where httptools is not installed: its import fails, so h11 serves.
WITHOUT_HTTPTOOLS = """
import sys
sys.modules["httptools"] = None
from ireneo.server import deadlines
assert deadlines.ReadDeadlineProtocol is deadlines.H11Deadlines
from ireneo.cli import main
main(["serve", "--port", sys.argv[1]])
"""


def start_without_httptools(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, "-c", WITHOUT_HTTPTOOLS, str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def test_serve_runs_httptools_with_the_deadlines():
    options = uvicorn_options(Settings(read_timeout=3.0))
    assert issubclass(options["http"], deadlines.HttpToolsDeadlines)
    assert options["http"].read_timeout == 3.0
    assert issubclass(processes.WorkerProtocol, deadlines.HttpToolsDeadlines)  # --workers N


@pytest.fixture(scope="module", params=["httptools", "h11"])
def server(request, tmp_path_factory):
    home = tmp_path_factory.mktemp(f"deadlines-{request.param}")
    env = subprocess_env(
        **SERVER_ENV,
        IRENEO_HOME=str(home),
        IRENEO_READ_TIMEOUT=str(READ_TIMEOUT),
        IRENEO_INGEST_QUEUE=str(QUEUE),
        IRENEO_INGEST_CONCURRENCY="1",
    )
    start = start_server if request.param == "httptools" else start_without_httptools
    process, url = start(env)
    PIDS[url] = process.pid
    try:
        wait_ready(process, url)
        yield url
    finally:
        stop_server(process)


PIDS: dict[str, int] = {}  # each server's process, by its URL


def resident_mb(url: str) -> float:
    """The server process's resident memory, in MB."""
    with open(f"/proc/{PIDS[url]}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def connect(url: str) -> socket.socket:
    sock = socket.create_connection(address(url), timeout=10)
    return sock


def stalled_post(url: str, user: str, n: int) -> socket.socket:
    """A post whose body stops a little after its start, Content-Length promising more."""
    body = json.dumps(conversation(f"stall-{n}", ["Stalled turn."], user=user)).encode()
    sock = connect(url)
    sock.sendall(
        b"POST /turns HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n"
        + f"x-ingest-key: {INGEST_KEY}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body[:20]
    )
    return sock


def still_open(sock: socket.socket) -> bool:
    """Nothing received and no end of stream yet (checked without waiting)."""
    sock.setblocking(False)
    try:
        return not sock.recv(1, socket.MSG_PEEK) and False
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


def trickle(
    sock: socket.socket, chunks: Iterable[bytes], every: float, until: float
) -> float | None:
    """Send `chunks` one every `every` seconds until the server closes the connection (when
    it did, by time.monotonic) or `until` passes, or the chunks end (None)."""
    for chunk in chunks:
        if time.monotonic() > until:
            return None
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic()
        if not still_open(sock):
            return time.monotonic()
        time.sleep(every)
    return None


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed it."""
    sock.settimeout(timeout)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received, time.monotonic()


def read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length: its head and body."""
    sock.settimeout(10)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return received


def post(url: str, body: dict) -> httpx2.Response:
    return httpx2.post(f"{url}/turns", json=body, headers={"x-ingest-key": INGEST_KEY}, timeout=30)


def test_stalled_bodies_take_no_queue_place_and_are_answered_408(server):
    assert post(server, conversation("warm", ["Warm up."], user="olga")).status_code == 202
    stalled = [stalled_post(server, "staller", n) for n in range(QUEUE * 4)]
    try:
        started = time.monotonic()
        # with four times the queue stalled, other posts still go through, at once
        for n in range(QUEUE + 2):
            response = post(server, conversation(f"ok-{n}", [f"Fine turn FT-{n}."], user="olga"))
            assert response.status_code == 202, response.text
        assert all(still_open(sock) for sock in stalled)  # all while the stalled ones are held
        for sock in stalled:
            received, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
            assert received.startswith(b"HTTP/1.1 408"), received[:80]
            assert b"did not arrive within" in received
            assert closed - started <= READ_TIMEOUT + SLACK
    finally:
        for sock in stalled:
            sock.close()
    assert post(server, conversation("after", ["After the stall."], user="olga")).status_code == 202


def test_half_sent_and_absent_headers_are_closed_within_the_deadline(server):
    started = time.monotonic()
    half = []
    for n in range(HALF_SENT):
        sock = connect(server)
        sock.sendall(f"POST /turns HTTP/1.1\r\nhost: test\r\nx-n: {n}\r\n".encode())
        half.append(sock)
    silent = [connect(server) for _ in range(50)]
    try:
        health = httpx2.get(f"{server}/health", timeout=10)  # the server answers meanwhile
        assert health.status_code == 200
        for sock in half:
            received, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
            assert received.startswith(b"HTTP/1.1 408"), received[:80]
            assert closed - started <= READ_TIMEOUT + SLACK
        for sock in silent:
            received, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
            assert received == b""
            assert closed - started <= READ_TIMEOUT + SLACK
    finally:
        for sock in half + silent:
            sock.close()


def test_a_head_trickled_a_byte_at_a_time_is_closed_at_the_deadline(server):
    head = b"GET /health HTTP/1.1\r\nhost: test\r\n" + b"x-pad: " + b"a" * 200
    sock = connect(server)
    started = time.monotonic()
    try:  # a byte every 0.1 s: never idle, never done
        bytes_ = (bytes([byte]) for byte in head)
        closed_at = trickle(sock, bytes_, 0.1, started + READ_TIMEOUT + SLACK)
    finally:
        sock.close()
    assert closed_at is not None, "never closed"
    assert READ_TIMEOUT - 0.5 <= closed_at - started <= READ_TIMEOUT + SLACK


def test_a_half_sent_head_after_a_served_request_is_closed_too(server):
    sock = connect(server)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n")
        first = read_response(sock)
        assert first.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: te")  # the next request, half sent
        received, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
        assert received.startswith(b"HTTP/1.1 408")
        assert closed - started <= READ_TIMEOUT + SLACK
    finally:
        sock.close()


def test_an_idle_connection_outlives_the_clients_pools(server):
    """Idle past uvicorn's own 5 s and httpx's pool expiry, the connection still serves: a
    client closes first, so none sends a request into a connection the server is closing."""
    sock = connect(server)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6.0)
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200")
    finally:
        sock.close()


def test_a_head_pipelined_behind_a_request_has_its_deadline_from_the_response(server):
    sock = connect(server)
    try:  # a whole request and half of the next, in one write
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\nGET /health HTTP/1.1\r\nhost: te")
        first = read_response(sock)
        started = time.monotonic()
        assert first.startswith(b"HTTP/1.1 200")
        assert still_open(sock)
        rest, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
        assert first.partition(b"\r\n\r\n")[2].count(b"HTTP/1.1") == 0
        assert rest.startswith(b"HTTP/1.1 408"), rest[:80]
        assert READ_TIMEOUT - 1.0 <= closed - started <= READ_TIMEOUT + SLACK
    finally:
        sock.close()


def test_a_body_its_route_never_reads_is_closed_past_the_deadline(server):
    """/health answers without reading the body; the body then trickles a byte every 0.25 s,
    which keeps uvicorn's keep-alive timer from closing the connection: the protocol does."""
    sock = connect(server)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\ncontent-length: 1000\r\n\r\n")
        started = time.monotonic()
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        until = started + READ_TIMEOUT + deadlines.BODY_GRACE + SLACK
        closed_at = trickle(sock, itertools.repeat(b"a"), 0.25, until)
    finally:
        sock.close()
    assert closed_at is not None, "never closed"
    assert closed_at - started >= READ_TIMEOUT


def test_a_slow_client_inside_the_deadline_is_served(server):
    body = json.dumps(conversation("slow", ["A slow but steady turn SL-1."], user="sam")).encode()
    sock = connect(server)
    try:
        sock.sendall(b"POST /turns HTTP/1.1\r\nhost: test\r\n")
        time.sleep(READ_TIMEOUT / 4)
        sock.sendall(
            b"content-type: application/json\r\n"
            + f"x-ingest-key: {INGEST_KEY}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        )
        time.sleep(READ_TIMEOUT / 4)
        sock.sendall(body[:30])
        time.sleep(READ_TIMEOUT / 4)
        sock.sendall(body[30:])
        sock.settimeout(30)
        answer = sock.recv(65536)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 202"), answer[:200]


def test_a_head_past_the_bound_is_refused_at_once(server):
    """llhttp bounds no head: a header of 1 MB was served (and one streamed for the deadline grew
    the server by 60 MB and stalled its loop). Refused as on h11: 431 (h11: 400), closed."""
    sock = connect(server)
    started = time.monotonic()
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # closed before the end
            sock.sendall(
                b"GET /health HTTP/1.1\r\nhost: test\r\nx-big: " + b"a" * 2**20 + b"\r\n\r\n"
            )
        received, closed = read_until_closed(sock, READ_TIMEOUT + SLACK)
    finally:
        sock.close()
    assert not received.startswith(b"HTTP/1.1 2"), received[:80]
    if received:  # the answer may be lost to the reset of a close with bytes unread
        assert received.startswith((b"HTTP/1.1 431", b"HTTP/1.1 400")), received[:80]
    assert closed - started < READ_TIMEOUT
    assert httpx2.get(f"{server}/health", timeout=10).status_code == 200


@pytest.fixture(params=["httptools", "h11"])
def logged_server(request, tmp_path):
    """A server as `server`, its log to a file: thousands of requests fill a pipe's buffer."""
    port = free_port()
    command = [PYTHON, "-m", "ireneo.cli", "serve", "--port", str(port)]
    if request.param == "h11":
        command = [PYTHON, "-c", WITHOUT_HTTPTOOLS, str(port)]
    env = subprocess_env(**SERVER_ENV, IRENEO_HOME=str(tmp_path), IRENEO_READ_TIMEOUT="4")
    with open(tmp_path / "server.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    PIDS[url] = process.pid
    try:
        wait_ready(process, url)
        warmed_up(tmp_path / "server.log")
        yield url
    finally:
        stop_server(process)


def warmed_up(log: Path, timeout: float = 90) -> None:
    """Until the server's log says its model loaded: /health answers before the warm-up
    ends, and the model's ~75 MB then arrive within a second, which a test measuring the
    server's growth from that moment would count as its own."""
    deadline = time.monotonic() + timeout
    while '"model_ready"' not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.1)


def test_pipelined_requests_are_read_no_faster_than_answered(logged_server):
    """httptools resumed reading at every response with requests still queued, so a client
    pipelining cheap requests grew the server without bound (+250 MB in 3 s, one connection)."""
    server = logged_server
    sock = connect(server)
    requests = b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n" * 5000
    before = resident_mb(server)
    most = before
    answered = 0
    done = threading.Event()

    def pipeline() -> None:
        started = time.monotonic()
        with contextlib.suppress(OSError):
            while time.monotonic() - started < 3 and not done.is_set():
                sock.sendall(requests)

    sender = threading.Thread(target=pipeline)
    sender.start()
    try:
        sock.settimeout(10)
        while sender.is_alive():
            with contextlib.suppress(ConnectionResetError):  # dropped: too many waiting
                answered += sock.recv(1 << 20).count(b"HTTP/1.1 200")
            most = max(most, resident_mb(server))
    finally:
        done.set()
        sock.close()
        sender.join()
    assert most - before < 40, f"{before:.0f} -> {most:.0f} MB ({answered} answered)"
    assert httpx2.get(f"{server}/health", timeout=10).status_code == 200


def test_a_client_that_never_reads_its_answers_is_dropped(logged_server):
    """uvicorn waits for ever for a paused write to drain: a client that sends requests and
    reads nothing held its connection (and the response waiting to be sent) for ever. A write
    stalled past the deadline now aborts the connection."""
    server = logged_server
    requests = 2_000  # 7 KB answers: far more than the buffers on the way hold (~3 MB)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # little room for answers
    sock.connect(address(server))
    sock.settimeout(READ_TIMEOUT + SLACK)
    try:
        with contextlib.suppress(OSError):  # the server stops reading: the send may time out
            sock.sendall(b"GET /openapi.json HTTP/1.1\r\nhost: test\r\n\r\n" * requests)
        time.sleep(READ_TIMEOUT + SLACK)  # reading nothing meanwhile
        received, _ = read_until_closed(sock, 30)
    finally:
        sock.close()
    assert received.count(b"HTTP/1.1 200") < requests / 2  # dropped, not served on
    assert httpx2.get(f"{server}/health", timeout=10).status_code == 200


def test_reads_of_many_pipelined_requests_are_bounded(logged_server):
    """httptools parses a whole read, queueing each pipelined request it holds: 7,000 in one
    read of 256 KB cost ~9 MB, 20 such connections 180 MB (h11 keeps the bytes only)."""
    before = resident_mb(logged_server)
    most = before
    socks = [connect(logged_server) for _ in range(20)]
    try:
        for sock in socks:
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: test\r\n\r\n" * 7000)
        for _ in range(20):
            time.sleep(0.1)
            most = max(most, resident_mb(logged_server))
    finally:
        for sock in socks:
            sock.close()
    assert most - before < 40, f"{before:.0f} -> {most:.0f} MB"
    assert httpx2.get(f"{logged_server}/health", timeout=10).status_code == 200
