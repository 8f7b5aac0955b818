"""The squad's MCP server (``/mcp``, streamable HTTP) for agent processes."""
