"""The memory inspector: `/inspect`, a small server-rendered page where a user sees, searches and
forgets what ireneo keeps about them.

- Sign in with a bearer token (the same tokens as `/mcp`, checked by the same verifier), or, as
  the operator, with `IRENEO_ADMIN_KEY` and a user's name. The page then knows only the user's
  key (the hash naming their memory directory), kept in a session on the server; the browser
  holds only the session's random id, in an HttpOnly, SameSite=Strict cookie. No URL ever names
  a user, and conversations are named by refs that mean something only inside the signed-in
  user's memory, so editing a URL cannot reach anyone else's.
- Sessions are kept on the server with their expiry (at most `SESSION_SECONDS`, and never past the
  token's own expiry), at most `MAX_SESSIONS_PER_USER` per user and `MAX_SESSIONS` in all (the
  oldest go first). Signing out ends the session on the server: a cookie copied before works no
  more.
- Every POST (sign-in, sign-out, forget) must come from the inspector's own pages: a browser's
  `Sec-Fetch-Site` must be `same-origin` (or `none`: typed by the user), and its `Origin`, when
  sent, must name this server's host. A request carrying neither header comes from no browser
  (curl, a script): it holds no one's cookie but its own, so it is let through. Sign-out and
  forget also need the session's CSRF token (docs/inspector.md).
- Conversations by date; a search that runs the agent's own recall (same `k`, same
  characters) and shows the turns an agent would get; a conversation read in full; a conversation forgotten (a POST with
  a CSRF token; audited as `inspector` or `operator`).
- Plain HTML, no script, no external resource; a Content-Security-Policy forbids both.

Sessions live in `<home>/inspect-sessions.sqlite`, shared by the processes that serve the home
(`ireneo serve --workers N`): a restart keeps them, and a sign-out anywhere ends one everywhere.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ireneo.errors import NotFound
from ireneo.memory import Memory
from ireneo.model import ConversationSummary, Hit, Turn
from ireneo.server.auth import IreneoJWTVerifier, caller_user
from ireneo.server.forget import Forgetter
from ireneo.server.logs import log_event
from ireneo.server.memories import OpenMemories, user_key
from ireneo.server.tools import recall_hits
from ireneo.store.sqlite import write_ahead
from ireneo.users import user_problem

log = logging.getLogger("ireneo.server")

COOKIE = "ireneo_inspect"
SESSION_SECONDS = 8 * 3600
OPERATOR_SECONDS = 3600
MAX_FORM_BYTES = 64 * 1024
MAX_QUERY_CHARS = 500
MAX_REF_CHARS = 64
MAX_SESSIONS = 10_000
MAX_SESSIONS_PER_USER = 8
SESSIONS_FILE = "inspect-sessions.sqlite"  # in the home

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make browsers send `Origin: null`
    "Cache-Control": "no-store",
}


@dataclass(frozen=True)
class Session:
    key: str  # the user's key (ireneo.server.memories.user_key), never the user id
    operator: bool
    expires: float
    csrf: str  # random, per session: the hidden field of every form that changes something

    @property
    def actor(self) -> str:
        return "operator" if self.operator else "inspector"


class Sessions:
    """Sign-ins kept on the server, by a digest of the random id their cookie holds.

    In a small SQLite file (`path`, in the home: every process serving the home sees a sign-in
    made by any of them, and a sign-out ends it for all; the cookie's id is never stored, only
    its digest), or in this process's RAM when `path` is None. Bounded: a user's oldest session
    ends when they start one past `per_user`, and the oldest of all when the table is full
    (after the expired ones are dropped).
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        path: Path | None = None,
        max_total: int = MAX_SESSIONS,
        per_user: int = MAX_SESSIONS_PER_USER,
    ):
        self.clock = clock
        self.max_total = max_total
        self.per_user = per_user
        try:
            self._db = self._open(path)
        except sqlite3.DatabaseError as exc:
            # Sign-ins are disposable (a person signs in again); the memories the server serves
            # are not: a damaged file costs sign-ins shared between processes, never the server.
            log_event(
                log,
                "inspect_sessions_unreadable",
                level=logging.WARNING,
                path=str(path),
                error=str(exc),
                fix="remove the file; sign-ins are kept in this process meanwhile",
            )
            self._db = self._open(None)

    @staticmethod
    def _open(path: Path | None) -> sqlite3.Connection:
        """The sessions' table in the file at `path` (made if missing), or in RAM for None."""
        if path is not None:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.touch(mode=0o600, exist_ok=True)
        # the event loop's thread only, but opened where the app is built
        db = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            db.execute("PRAGMA busy_timeout=5000")
            if path is not None:
                write_ahead(db)
            db.execute(
                "CREATE TABLE IF NOT EXISTS sessions (n INTEGER PRIMARY KEY AUTOINCREMENT, "
                "digest TEXT UNIQUE NOT NULL, key TEXT NOT NULL, operator INTEGER NOT NULL, "
                "expires REAL NOT NULL, csrf TEXT NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS sessions_key ON sessions (key, n)")
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM sessions").fetchone()[0]

    def count(self, key: str) -> int:
        return self._db.execute("SELECT count(*) FROM sessions WHERE key = ?", (key,)).fetchone()[0]

    def start(self, key: str, operator: bool, expires: float) -> tuple[str, Session]:
        """A new session; returns the id for the cookie (kept nowhere on the server)."""
        session_id = secrets.token_urlsafe(32)
        session = Session(key, operator, expires, secrets.token_urlsafe(32))
        with self._db:  # one transaction: the bounds hold with other processes signing in
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "DELETE FROM sessions WHERE n IN (SELECT n FROM sessions WHERE key = ? "
                "ORDER BY n DESC LIMIT -1 OFFSET ?)",
                (key, self.per_user - 1),
            )
            if len(self) >= self.max_total:
                self._db.execute("DELETE FROM sessions WHERE expires <= ?", (self.clock(),))
            self._db.execute(
                "DELETE FROM sessions WHERE n IN (SELECT n FROM sessions ORDER BY n DESC "
                "LIMIT -1 OFFSET ?)",
                (self.max_total - 1,),
            )
            self._db.execute(
                "INSERT INTO sessions (digest, key, operator, expires, csrf) "
                "VALUES (?, ?, ?, ?, ?)",
                (_digest(session_id), key, int(operator), expires, session.csrf),
            )
        return session_id, session

    def get(self, session_id: str) -> Session | None:
        if not session_id or len(session_id) > 128:
            return None
        digest = _digest(session_id)
        row = self._db.execute(
            "SELECT key, operator, expires, csrf FROM sessions WHERE digest = ?", (digest,)
        ).fetchone()
        if row is None:
            return None
        session = Session(row[0], bool(row[1]), row[2], row[3])
        if session.expires <= self.clock():
            self._db.execute("DELETE FROM sessions WHERE digest = ?", (digest,))
            return None
        return session

    def end(self, session_id: str) -> None:
        self._db.execute("DELETE FROM sessions WHERE digest = ?", (_digest(session_id),))

    def close(self) -> None:
        self._db.close()


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def same_site(request: Request) -> bool:
    """Whether a POST may come from the inspector's own page (see the module).

    Browsers send `Origin` with every POST, and `Sec-Fetch-Site` too (all current ones): a form
    on another site that posts here says `cross-site` and names its own origin. Neither header
    can be set by a page. `Origin: null` (a sandboxed frame, a redirect, a no-referrer page) is
    trusted only beside `Sec-Fetch-Site: same-origin`. Without both headers, no browser sent the
    request, so no victim's cookie rode along with it.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    if origin == "null":  # privacy-sensitive contexts; trusted only when the browser says whence
        return site == "same-origin"
    try:
        host = urlsplit(origin).netloc.lower()
    except ValueError:
        return False
    ours = {
        value.strip().lower()
        for name in ("host", "x-forwarded-host")
        for value in request.headers.get(name, "").split(",")
        if value.strip()
    }
    return host in ours


class Inspector:
    def __init__(
        self,
        *,
        registry: OpenMemories,
        forgetter: Forgetter,
        verifier: IreneoJWTVerifier,
        admin_key: str | None,
        recall_k: int,
        max_chars: int | None = None,
        clock: Callable[[], float] = time.time,
        sessions: Path | None = None,
    ):
        """`sessions`: the file that keeps sign-ins (None: this process's RAM)."""
        self.registry = registry
        self.forgetter = forgetter
        self.verifier = verifier
        self.admin_key = admin_key
        self.recall_k = recall_k
        self.max_chars = max_chars  # the tool's answer's characters: the same hits as an agent
        self.clock = clock
        self.sessions = Sessions(clock, path=sessions)

    # -- routes ----------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self._sign_in_page(request.query_params.get("error"))
        sessions = await asyncio.to_thread(self._with_memory, session, _list_conversations)
        notice = {"forgotten": "The conversation was forgotten."}.get(
            request.query_params.get("done", "")
        )
        return self._page(
            "Your conversations",
            session,
            _search_form("") + _notice(notice) + _conversation_list(sessions or []),
        )

    async def sign_in(self, request: Request) -> Response:
        if not same_site(request):
            return self._cross_site()
        form = await _form(request)
        if form is None:
            return _redirect("/inspect?error=form")
        token = form.get("token", "").strip()
        if token:
            access = await self.verifier.load_access_token(token)
            user = caller_user(access)
            if user is None:
                return _redirect("/inspect?error=token")
            expires = min(access.expires_at or 1 << 62, self.clock() + SESSION_SECONDS)
            return self._start(request, user_key(user), False, expires)
        admin, user = form.get("admin_key", ""), form.get("user", "").strip()
        if admin and user:
            if not self.admin_key or not hmac.compare_digest(
                admin.encode("utf-8"), self.admin_key.encode("utf-8")
            ):
                return _redirect("/inspect?error=admin")
            if user_problem(user) is not None:
                return _redirect("/inspect?error=user")
            expires = self.clock() + OPERATOR_SECONDS
            return self._start(request, user_key(user), True, expires)
        return _redirect("/inspect?error=empty")

    async def sign_out(self, request: Request) -> Response:
        if not same_site(request):
            return self._cross_site()
        session = self._session(request)
        if session is not None:
            form = await _form(request)
            if not _csrf_matches(form, session):
                return self._stale_form(session, "Still signed in")
            self.sessions.end(request.cookies.get(COOKIE, ""))
        response = _redirect("/inspect")
        response.delete_cookie(COOKIE, path="/inspect")
        return response

    async def search(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return _redirect("/inspect")
        query = request.query_params.get("q", "").strip()[:MAX_QUERY_CHARS]
        if not query:
            return _redirect("/inspect")
        found = await asyncio.to_thread(
            self._with_memory, session, lambda m: _recall(m, query, self.recall_k, self.max_chars)
        )
        hits, refs = found or ([], {})
        body = _search_form(query) + _hit_list(hits, refs)
        return self._page(f"Search: {query}", session, body)

    async def conversation(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return _redirect("/inspect")
        ref = request.path_params["ref"]
        found = None
        if len(ref) <= MAX_REF_CHARS:
            found = await asyncio.to_thread(self._with_memory, session, lambda m: _read(m, ref))
        if found is None:
            return self._page(
                "No such conversation",
                session,
                "<p>There is no conversation with that reference in your memory.</p>",
                status=404,
            )
        session_id, turns = found
        body = _conversation(ref, session_id, turns, session.csrf)
        return self._page(f"Conversation of {turns[0].ts:%Y-%m-%d}", session, body)

    async def forget(self, request: Request) -> Response:
        if not same_site(request):
            return self._cross_site()
        session = self._session(request)
        if session is None:
            return _redirect("/inspect")
        form = await _form(request)
        if form is None or not _csrf_matches(form, session):
            return self._stale_form(session, "Not forgotten")
        ref = form.get("ref", "")[:MAX_REF_CHARS]
        found = await asyncio.to_thread(self._with_memory, session, lambda m: m.resolve_ref(ref))
        if not found:
            return self._page("No such conversation", session, "<p>Nothing to forget.</p>", 404)
        await asyncio.to_thread(self.forgetter.conversation, session.key, found, session.actor)
        return _redirect("/inspect?done=forgotten")

    # -- sessions --------------------------------------------------------------------------
    def _start(self, request: Request, key: str, operator: bool, expires: float) -> Response:
        session_id, _ = self.sessions.start(key, operator, expires)
        response = _redirect("/inspect")
        response.set_cookie(
            COOKIE,
            session_id,
            max_age=max(1, int(expires - self.clock())),
            path="/inspect",
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )
        return response

    def _session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE, ""))

    def _stale_form(self, session: Session, title: str) -> Response:
        return self._page(
            title,
            session,
            "<p>The form was out of date. Open the page again and retry.</p>",
            status=403,
        )

    def _cross_site(self) -> Response:
        return self._page(
            "Refused",
            None,
            "<p>This form was sent from another site. Open the memory inspector at its own "
            'address (<a href="/inspect">/inspect</a>) and use its forms.</p>',
            status=403,
        )

    def _with_memory(self, session: Session, read: Callable[[Memory], object]):
        """`read(memory)` on the signed-in user's memory (None when they have none)."""
        with self.registry.lease(session.key, create=False) as memory:
            return None if memory is None else read(memory)

    # -- pages -----------------------------------------------------------------------------
    def _sign_in_page(self, error: str | None) -> Response:
        message = {
            "token": "That token was not accepted (expired, or not for this server).",
            "admin": "That operator key was not accepted.",
            "user": "That user id is not one ireneo accepts (blank, too long or with control "
            "characters).",
            "empty": "Paste a token, or give the operator key and a user.",
            "form": "The form could not be read.",
        }.get(error or "")
        operator = (
            """
<form method="post" action="/inspect/sign-in" class="card">
  <h2>Operator</h2>
  <p><label for="admin_key">Admin key</label>
  <input id="admin_key" name="admin_key" type="password" autocomplete="off" required></p>
  <p><label for="user">User</label>
  <input id="user" name="user" type="text" autocomplete="off" required></p>
  <p><button type="submit">Open this user's memory</button></p>
</form>"""
            if self.admin_key
            else ""
        )
        body = f"""{_notice(message, error=True)}
<form method="post" action="/inspect/sign-in" class="card">
  <h2>Sign in</h2>
  <p><label for="token">Your access token</label>
  <textarea id="token" name="token" rows="4" autocomplete="off" spellcheck="false"
   required></textarea></p>
  <p><button type="submit">Sign in</button></p>
</form>{operator}"""
        return self._page("Memory inspector", None, body, 401 if message else 200)

    def _page(self, title: str, session: Session | None, body: str, status: int = 200) -> Response:
        who = ""
        if session is not None:
            role = "operator, for user" if session.operator else "signed in as user"
            who = f"""<div class="who"><span>{role} <code>{session.key[:8]}…</code></span>
<form method="post" action="/inspect/sign-out">
<input type="hidden" name="csrf" value="{escape(session.csrf)}">
<button type="submit" class="link">Sign out</button></form></div>"""
        html = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · ireneo</title><style>{CSS}</style></head>
<body><header><a href="/inspect" class="brand">ireneo · memory inspector</a>{who}</header>
<main><h1>{escape(title)}</h1>{body}</main></body></html>"""
        return HTMLResponse(html, status_code=status, headers=HEADERS)


# -- reading the memory (in a worker thread) ------------------------------------------------------


def _list_conversations(memory: Memory) -> list[tuple[ConversationSummary, str]]:
    found = sorted(memory.sessions(), key=lambda s: s.last_ts, reverse=True)
    return [(s, memory.conversation_ref(s.session_id)) for s in found]


def _recall(
    memory: Memory, query: str, k: int, max_chars: int | None
) -> tuple[list[Hit], dict[str, str]]:
    hits = recall_hits(memory, query, k, max_chars)  # what recall_my_conversations shows
    return hits, {hit.session_id: memory.conversation_ref(hit.session_id) for hit in hits}


def _read(memory: Memory, ref: str) -> tuple[str, list[Turn]] | None:
    session_id = memory.resolve_ref(ref)
    if session_id is None:
        return None
    try:
        return session_id, memory.get(session_id)
    except NotFound:
        return None


# -- HTML pieces ----------------------------------------------------------------------------------


def _search_form(query: str) -> str:
    return f"""<form method="get" action="/inspect/search" class="search" role="search">
<label for="q">Search your conversations as your assistant does</label>
<div class="row"><input id="q" name="q" type="search" value="{escape(query)}" required>
<button type="submit">Search</button></div></form>"""


def _notice(message: str | None, *, error: bool = False) -> str:
    if not message:
        return ""
    kind = "error" if error else "done"
    return f'<p class="notice {kind}" role="status">{escape(message)}</p>'


def _conversation_list(rows: list[tuple[ConversationSummary, str]]) -> str:
    if not rows:
        return "<p>No conversations are stored for you.</p>"
    items = "\n".join(
        f"""<tr><td><time datetime="{s.last_ts:%Y-%m-%dT%H:%MZ}">{s.first_ts:%Y-%m-%d %H:%M}</time></td>
<td><a href="/inspect/c/{quote(ref)}">{escape(s.first_words) or "(no text)"}</a></td>
<td class="num">{s.turns}</td></tr>"""
        for s, ref in rows
    )
    return f"""<h2>Stored conversations ({len(rows)})</h2>
<table><thead><tr><th scope="col">Started (UTC)</th><th scope="col">First words</th>
<th scope="col" class="num">Turns</th></tr></thead><tbody>{items}</tbody></table>"""


def _hit_list(hits: list[Hit], refs: dict[str, str]) -> str:
    if not hits:
        return "<p>Nothing found. Your assistant would get no passage for this search.</p>"
    parts = [
        f"<p>Your assistant would get these {len(hits)} passages, best first. The highlighted "
        "turn is the one that matched; the others are shown around it.</p><ol class=hits>"
    ]
    for hit in hits:
        ref = refs.get(hit.session_id, "")
        turns = sorted([*hit.context, hit], key=lambda t: t.seq)
        lines = "".join(
            f'<li class="turn{" hit" if t is hit else ""}"><span class="role">[{t.seq}] '
            f"{escape(t.role)}</span> {_text(t.text)}</li>"
            for t in turns
        )
        parts.append(
            f"""<li><p class="meta">{hit.ts:%Y-%m-%d %H:%M} UTC ·
<a href="/inspect/c/{quote(ref)}#turn-{hit.seq}">open the conversation</a></p>
<ul class="turns">{lines}</ul></li>"""
        )
    return "".join(parts) + "</ol>"


def _conversation(ref: str, session_id: str, turns: list[Turn], csrf: str) -> str:
    rows = "".join(
        f"""<li id="turn-{t.seq}" class="turn"><p class="meta"><span class="role">{escape(t.role)}</span>
· {t.ts:%Y-%m-%d %H:%M} UTC · turn {t.seq}{_ECHO if t.echo else ""}</p>{_text(t.text)}</li>"""
        for t in turns
    )
    return f"""<p class="meta">Conversation <code>{escape(session_id)}</code> ·
{len(turns)} turns</p>
<ol class="conversation">{rows}</ol>
<form method="post" action="/inspect/forget" class="card danger">
<input type="hidden" name="ref" value="{escape(ref)}">
<input type="hidden" name="csrf" value="{escape(csrf)}">
<p>Forgetting removes this conversation's text, search entries and vectors now.
It cannot be undone.</p>
<p><button type="submit" class="danger">Forget this conversation</button></p></form>"""


_ECHO = (
    ' · <span class="echo">recall echo: it repeats what recall gave your assistant, '
    "so it is not recalled itself</span>"
)


def _text(text: str) -> str:
    return "<div class=text>" + escape(text).replace("\n", "<br>") + "</div>"


# -- plumbing -------------------------------------------------------------------------------------


async def _form(request: Request) -> dict[str, str] | None:
    """An urlencoded form (the only kind these pages send), at most MAX_FORM_BYTES."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return None
    return {name: values[0] for name, values in fields.items()}


def _csrf_matches(form: dict[str, str] | None, session: Session) -> bool:
    given = (form or {}).get("csrf", "")
    return hmac.compare_digest(given.encode("utf-8", "replace"), session.csrf.encode())


def _redirect(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers=HEADERS)


CSS = """
:root { color-scheme: light dark; --fg: #1d2430; --muted: #5b6675; --bg: #f7f8fa; --card: #fff;
  --line: #d9dee5; --accent: #1f5fbf; --hit: #fff6d6; --danger: #b3261e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ee; --muted: #a3adba; --bg: #15181d;
  --card: #1d2128; --line: #333a44; --accent: #7fb0ff; --hit: #3a3420; --danger: #ff8a80; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
header { display: flex; justify-content: space-between; align-items: center; gap: 1rem;
  padding: .75rem 1.5rem; border-bottom: 1px solid var(--line); background: var(--card); }
.brand { font-weight: 600; color: var(--fg); text-decoration: none; }
.who { display: flex; gap: .75rem; align-items: center; color: var(--muted); font-size: .9rem; }
.who form { margin: 0; }
main { max-width: 60rem; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; overflow-wrap: anywhere; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
a { color: var(--accent); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 1rem 1.25rem; margin: 1rem 0; max-width: 36rem; }
.card.danger { border-color: var(--danger); max-width: none; }
.card > p:first-of-type { margin-top: 0; } .card > p:last-child { margin-bottom: 0; }
label { display: block; font-weight: 600; margin-bottom: .25rem; }
input, textarea { width: 100%; font: inherit; padding: .5rem; border: 1px solid var(--line);
  border-radius: 6px; background: var(--bg); color: var(--fg); }
textarea { font-family: ui-monospace, monospace; font-size: .85rem; }
button { font: inherit; padding: .5rem 1rem; border-radius: 6px; border: 1px solid var(--accent);
  background: var(--accent); color: #fff; cursor: pointer; }
button.danger { background: var(--danger); border-color: var(--danger); }
button.link { background: none; border: none; color: var(--accent); padding: 0;
  text-decoration: underline; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.search .row { display: flex; gap: .5rem; }
table { width: 100%; border-collapse: collapse; background: var(--card);
  border: 1px solid var(--line); border-radius: 8px; }
th, td { text-align: left; padding: .5rem .75rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-size: .85rem; color: var(--muted); font-weight: 600; }
td:first-child { white-space: nowrap; font-variant-numeric: tabular-nums; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.notice { padding: .6rem 1rem; border-radius: 6px; border: 1px solid var(--line);
  background: var(--card); }
.notice.error { border-color: var(--danger); color: var(--danger); }
.meta { color: var(--muted); font-size: .9rem; margin: 0 0 .25rem; }
.role { font-weight: 600; color: var(--fg); }
ol.hits > li { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .75rem 1rem; margin: .75rem 0; }
ul.turns { list-style: none; padding: 0; margin: 0; }
ul.turns li { padding: .25rem .5rem; border-radius: 4px; }
li.hit { background: var(--hit); }
ol.conversation { list-style: none; padding: 0; }
ol.conversation li { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .75rem 1rem; margin: .5rem 0; }
.text { overflow-wrap: anywhere; }
.echo { font-style: italic; }
code { font-family: ui-monospace, monospace; font-size: .9em; }
"""
