"""Who is calling: bearer JWTs on `/mcp` (FastMCP's JWTVerifier), development tokens.

The caller's user is the token's `sub` claim. A token without `sub` or without `exp` is refused,
on top of what JWTVerifier checks (signature, algorithm, expiry, issuer, audience).
"""

from __future__ import annotations

import time

import jwt
from fastmcp.server.auth import AccessToken
from fastmcp.server.auth.providers.jwt import JWTVerifier

from ireneo.server.settings import Settings


class IreneoJWTVerifier(JWTVerifier):
    """JWTVerifier that also insists on a subject and an expiry."""

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = await super().load_access_token(token)
        if access is None:
            return None
        sub = access.claims.get("sub")
        if not isinstance(sub, str) or not sub.strip() or "exp" not in access.claims:
            self.logger.info("Bearer token rejected: no sub or no exp claim")
            return None
        return access


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
    return IreneoJWTVerifier(issuer=settings.jwt_issuer, audience=settings.jwt_audience, **key)


def caller_user(access: AccessToken | None) -> str | None:
    """The user a verified token speaks for: its `sub` claim."""
    if access is None:
        return None
    sub = access.claims.get("sub")
    return sub if isinstance(sub, str) and sub.strip() else None


def mint_token(settings: Settings, user: str, ttl: int = 3600) -> str:
    """An HS256 token for `user`, signed with IRENEO_JWT_SECRET, with the configured iss/aud."""
    if not settings.jwt_secret:
        raise ValueError("IRENEO_JWT_SECRET is not set: development tokens are signed with it")
    if not user.strip():
        raise ValueError("the user must not be blank")
    if ttl <= 0:
        raise ValueError("the time to live must be at least one second")
    now = int(time.time())
    claims: dict = {"sub": user, "iat": now, "exp": now + ttl}
    if settings.jwt_issuer:
        claims["iss"] = settings.jwt_issuer
    if settings.jwt_audience:
        claims["aud"] = settings.jwt_audience
    return jwt.encode(claims, settings.jwt_secret, algorithm="HS256")
