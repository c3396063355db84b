"""The recall server: keyed ingest (`POST /turns`), authenticated MCP tools (`/mcp`), the chat
loop, forgetting, the inspector, and the per-user debounced indexer.

`app.create_app(settings)` wires it: `build_state` makes each part from the settings, `routes`
lists the plain HTTP routes, `lifespan` runs the background jobs. The MCP tools live in
`tools`, every bound and timeout they apply in `limits.Limits`, the open memories in
`memories.OpenMemories`; `ireneo serve` and `ireneo mcp` (`commands`, `stdio`) run it, and
`ireneo serve --workers N` runs N processes of it on one home (`processes`, `locks`).
Nothing is imported here, so that `ireneo.server.commands` stays cheap to import."""
