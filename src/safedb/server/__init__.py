"""Thin MCP wiring: tools, both protocol eras, transports."""
