// Package mcptools gives Cairn agents the tools of MCP (Model Context
// Protocol) servers, through the official Go SDK
// (github.com/modelcontextprotocol/go-sdk).
//
// Connect starts a server (a command speaking MCP on stdin and stdout) or
// reaches one (a streamable HTTP URL, with headers), completes the
// handshake and lists its tools; Client.Tool and Client.Tools return them
// as agent.Tool values, named ToolName(server, tool) ("files__read"), for
// agent.RunTools, networks, loop agents and agent files
// (agentfile.RunConfig.Tools, or mcp_servers: in the front matter).
//
// Each call carries its idempotency key (agent.ToolContext.Key) in the
// request's _meta under IdempotencyKeyMeta and is bounded by
// Server.Timeout. Failures are errors, never panics, and a tool loop hands
// them to the model as the tool's result: a tool that reports an error
// (isError) is ErrToolFailed, a server that exits, breaks the protocol,
// answers with a JSON-RPC error or does not answer in time is ErrCall; a
// stdio server that exited is started again on the next call.
//
// Durability comes from the tool loop, not from this package: inside a
// flow step, agent.RunTools records each completed call in the step's
// journal (flow.Record), so a step that runs again after a crash replays
// it instead of calling the server again.
//
// MCP tasks (the 2025-11-25 specification's call-now, fetch-later tool
// calls) are not used: the Go SDK, v1.8.0, implements neither the client
// nor the server side of them. A call is a plain tools/call that lasts as
// long as the tool runs, up to Server.Timeout.
//
// A stdio server runs with the rights of this process and an environment
// reduced to PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG and TMPDIR plus
// Server.Env: no API key of this process reaches it unless it is given.
package mcptools
