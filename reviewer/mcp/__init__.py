"""Tollgate for coding agents: an MCP server (the `mcp` SDK) over stdio (`manage.py mcp`) and streamable HTTP
(`/mcp`). Its tools answer what the API answers, scoped to the caller's org and bounded (bounded.py)."""
