#!/usr/bin/env sh
# Give Claude Code the recall server: one HTTP MCP server named "recall", with a bearer token.
#
# The token's `sub` is the user whose memory is searched. In development, mint one with the
# server's secret (IRENEO_JWT_SECRET, IRENEO_JWT_ISSUER and IRENEO_JWT_AUDIENCE as the server
# has them); in production, use a token from your identity provider instead.
set -eu
URL="${IRENEO_URL:-http://127.0.0.1:8000}"
TOKEN="${IRENEO_TOKEN:-$(ireneo token --user "${1:-alice}")}"
claude mcp add --transport http recall "$URL/mcp" --header "Authorization: Bearer $TOKEN"
claude mcp list
