// Package mcp is ctx's side of MCP: `ctxmcp list`, `project` and `serve`,
// the tools projected from an MCP server and the keeper that holds warm
// servers for a run. The protocol itself is package mcpstdio.
package mcp
