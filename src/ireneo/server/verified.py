"""Tokens already verified, remembered so that an agent's next call skips the work.

An agent sends the same bearer token with every MCP call, and verifying it (decoding, importing
the key, the signature, the claims' checks) is costly (docs/reliability.md has the figure).
`remember_verified(verifier)` keeps the verifier's answer for a token that passed, keyed by
the whole token (signature included: another string is verified afresh), until the token
expires or `REMEMBER_SECONDS` pass, whichever comes first (a key rotated out of a JWKS stops
a remembered token within that time). Refused tokens are never remembered. At most `SIZE`
tokens are kept, the least recently used dropped first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from fastmcp.server.auth import AccessToken

SIZE = 4096
REMEMBER_SECONDS = 300.0


def remember_verified(verifier: Any, *, size: int = SIZE, seconds: float = REMEMBER_SECONDS):
    """Wrap `verifier.verify_token` (FastMCP's TokenVerifier) with the memory; returns it."""
    verify = verifier.verify_token
    kept: OrderedDict[str, tuple[float, AccessToken]] = OrderedDict()

    async def verify_token(token: str) -> AccessToken | None:
        now = time.time()
        hit = kept.get(token)
        if hit is not None:
            until, access = hit
            if now < until:
                kept.move_to_end(token)
                return access
            del kept[token]
        access = await verify(token)
        exp = None if access is None else access.claims.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp > now:
            kept[token] = (min(float(exp), now + seconds), access)
            while len(kept) > size:
                kept.popitem(last=False)
        return access

    verifier.verify_token = verify_token
    return verifier
