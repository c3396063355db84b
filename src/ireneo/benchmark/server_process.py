"""A real `ireneo serve` in a process of its own on 127.0.0.1, for the load and crash harnesses:
start it, wait until it answers, kill it (politely or with SIGKILL), start it again on the same
home, read its RSS, mint tokens for it.

The memories live in `home` (IRENEO_HOME); with `database_url` the server is pointed at
PostgreSQL instead (IRENEO_DATABASE_URL), so the same harnesses can run against either store.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx2

INGEST_KEY = "harness-ingest-key-0123456789"
JWT_SECRET = "harness-jwt-secret-" + "0123456789abcdef" * 3
ISSUER = "ireneo-harness"
AUDIENCE = "ireneo"
SRC = str(Path(__file__).resolve().parents[2])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc (Linux); 0 for one that has ended."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0.0
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc (Linux)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        queue.extend(int(child) for child in children)
    return found


@dataclass
class ServerProcess:
    home: Path
    database_url: str | None = None
    env_extra: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    args: tuple[str, ...] = ()  # more options of `ireneo serve` (`--workers 2`)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    starts: int = 0
    _log: IO | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRENEO_")}
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = SRC + (os.pathsep + path if path else "")
        env.update(
            IRENEO_HOME=str(self.home),
            IRENEO_INGEST_KEY=INGEST_KEY,
            IRENEO_JWT_SECRET=JWT_SECRET,
            IRENEO_JWT_ISSUER=ISSUER,
            IRENEO_JWT_AUDIENCE=AUDIENCE,
        )
        if self.database_url:
            env["IRENEO_DATABASE_URL"] = self.database_url
        env.update(self.env_extra)
        return env

    def start(self, timeout: float = 60.0) -> None:
        """Start the server and wait until /health answers 200."""
        if self.log_path is not None and self._log is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ireneo.cli", "serve", "--port", str(self.port), *self.args],
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=self._log if self._log is not None else subprocess.DEVNULL,
        )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"ireneo serve exited with {self.process.returncode}")
            try:
                if httpx2.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("ireneo serve did not answer /health in time")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a power cut or the OOM killer."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        """SIGINT, the way an operator stops it; SIGKILL if it does not stop in 20 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def rss_mb(self) -> float:
        """The server's resident memory, its worker processes' included (`--workers`)."""
        assert self.process is not None
        return sum(rss_mb(pid) for pid in process_tree(self.process.pid))

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far, user and system, its worker processes' included
        (those that ended too, once waited for: a killed worker's CPU stays counted) (Linux)."""
        assert self.process is not None
        total = 0
        for pid in process_tree(self.process.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:  # ended meanwhile
                continue
            total += sum(int(f) for f in fields[11:15])  # own and waited-for children's
        return total / os.sysconf("SC_CLK_TCK")

    def health(self) -> dict | None:
        try:
            response = httpx2.get(f"{self.url}/health", timeout=5)
        except httpx2.TransportError:
            return None
        return response.json() if response.status_code == 200 else None

    def wait_indexed(self, timeout: float = 300.0, quiet: float = 1.0) -> None:
        """Wait until /health reports no index work for `quiet` seconds in a row."""
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while time.monotonic() < deadline:
            health = self.health()
            if health is not None and health.get("indexing") == 0:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= quiet:
                    return
            else:
                idle_since = None
            time.sleep(0.1)
        raise TimeoutError("the server kept indexing")

    def token(self, user: str, ttl: int = 24 * 3600) -> str:
        from ireneo.config import Settings
        from ireneo.server.auth import mint_token

        settings = Settings(jwt_secret=JWT_SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
        return mint_token(settings, user, ttl)

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
