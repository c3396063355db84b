"""The recall server: keyed ingest (`POST /turns`), authenticated MCP tools (`/mcp`), and the
per-user debounced indexer. `ireneo.server.app.create_app(settings)` builds it; `ireneo serve`
runs it. Nothing is imported here, so that `ireneo.server.commands` stays cheap to import."""
