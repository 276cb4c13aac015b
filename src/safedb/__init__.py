"""SafeDB: an MCP server that runs read-only SQL at once and asks a human before anything changes."""

__version__ = "0.1.0"
