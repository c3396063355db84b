"""Who is calling: bearer JWTs on `/mcp` (FastMCP's JWTVerifier), development tokens.

The caller's user is the token's `sub` claim. On top of what JWTVerifier checks (signature,
algorithm, expiry, issuer, audience), a token is refused unless every claim ireneo relies on has
the right type: `sub` a user id (`ireneo.users`), `exp` a number no further than
IRENEO_MAX_TOKEN_LIFETIME from now, `iat` and `nbf` numbers when present, `iss` a string and `aud`
a string or a list of strings. JWTVerifier alone lets `"exp": null` through (a token that never
expires) and a `sub` no memory key can be made from.
"""

from __future__ import annotations

import math
import time
from typing import Any

import jwt
from fastmcp.server.auth import AccessToken
from fastmcp.server.auth.providers.jwt import JWTVerifier

from ireneo.config import Settings
from ireneo.users import is_user, user_problem

LEEWAY_SECONDS = 60  # clock skew allowed between the issuer and this server


class IreneoJWTVerifier(JWTVerifier):
    """JWTVerifier that also type-checks the claims and bounds the token's lifetime."""

    def __init__(self, *, max_lifetime: float = 86400.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.max_lifetime = max_lifetime

    async def load_access_token(self, token: str) -> AccessToken | None:
        try:
            access = await super().load_access_token(token)
        except (OverflowError, ValueError, TypeError) as exc:  # "exp": Infinity fails int()
            self.logger.info("Bearer token rejected: %s", type(exc).__name__)
            return None
        if access is None:
            return None
        problem = claims_problem(access.claims, self.max_lifetime, time.time())
        if problem is not None:
            self.logger.info("Bearer token rejected: %s", problem)
            return None
        return access


def claims_problem(claims: dict, max_lifetime: float, now: float) -> str | None:
    """Why verified `claims` cannot name a caller (a signature says who wrote them, not that
    they make sense); None when they can."""
    sub = claims.get("sub")
    if sub is None:
        return "no sub claim"
    problem = user_problem(sub)
    if problem is not None:
        return f"sub {problem}"
    if "exp" not in claims:
        return "no exp claim"
    for name in ("exp", "iat", "nbf"):
        if name in claims and not _is_time(claims[name]):
            return f"{name} is not a number of seconds"
    if claims["exp"] > now + max_lifetime + LEEWAY_SECONDS:
        return f"exp lies more than {max_lifetime:g} seconds ahead (IRENEO_MAX_TOKEN_LIFETIME)"
    if "iat" in claims and claims["iat"] > now + LEEWAY_SECONDS:
        return "iat lies in the future"
    if "iss" in claims and not isinstance(claims["iss"], str):
        return "iss is not a string"
    aud = claims.get("aud")
    if aud is not None and not (
        isinstance(aud, str) or (isinstance(aud, list) and all(isinstance(a, str) for a in aud))
    ):
        return "aud is neither a string nor a list of strings"
    return None


def _is_time(value: object) -> bool:
    """A number of seconds since 1970 (not a bool, not NaN or infinite, not negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (isinstance(value, int) or math.isfinite(value)) and value >= 0


def build_verifier(settings: Settings) -> IreneoJWTVerifier:
    """The verifier for `settings` (call `settings.problems()` first)."""
    if settings.jwt_secret:
        key: dict = {"public_key": settings.jwt_secret, "algorithm": "HS256"}
    elif settings.jwt_public_key:
        key = {"public_key": settings.jwt_public_key, "algorithm": "RS256"}
    elif settings.jwks_url:
        key = {"jwks_uri": settings.jwks_url, "algorithm": "RS256"}
    else:
        raise ValueError("no token key configured (IRENEO_JWT_SECRET, _PUBLIC_KEY or JWKS_URL)")
    return IreneoJWTVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        max_lifetime=settings.max_token_lifetime,
        **key,
    )


def caller_user(access: AccessToken | None) -> str | None:
    """The user a verified token speaks for: its `sub` claim (None if it cannot be a user)."""
    if access is None:
        return None
    sub = access.claims.get("sub")
    return sub if is_user(sub) else None


def mint_token(settings: Settings, user: str, ttl: int = 3600) -> str:
    """An HS256 token for `user`, signed with IRENEO_JWT_SECRET, with the configured iss/aud."""
    if not settings.jwt_secret:
        raise ValueError("IRENEO_JWT_SECRET is not set: development tokens are signed with it")
    problem = user_problem(user)
    if problem is not None:
        raise ValueError(f"the user {problem}")
    if ttl <= 0:
        raise ValueError("the time to live must be at least one second")
    if ttl > settings.max_token_lifetime:
        raise ValueError(
            f"the time to live is at most {settings.max_token_lifetime:g} seconds "
            "(IRENEO_MAX_TOKEN_LIFETIME): the server refuses tokens that live longer"
        )
    now = int(time.time())
    claims: dict = {"sub": user, "iat": now, "exp": now + ttl}
    if settings.jwt_issuer:
        claims["iss"] = settings.jwt_issuer
    if settings.jwt_audience:
        claims["aud"] = settings.jwt_audience
    return jwt.encode(claims, settings.jwt_secret, algorithm="HS256")
