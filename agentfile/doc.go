// Package agentfile reads agent files — Markdown with YAML front matter,
// Quick Agent's format — and runs them on the flow runner, so they get
// Cairn's durability, history and resume for free.
//
// An agent file's chain of text and structured steps becomes one node per
// step; the state is {agent_id, steps: {id: output}, final_output, input};
// each step's prompt carries the input (source and kind), its content, the
// chain state as JSON (steps in chain order) and the step's instructions. Structured steps are
// validated against their schema (with the first-JSON-object fallback).
// The final output goes to output.file; a handoff passes it to the next
// agent in the same thread. Every path stays inside the safe directory
// (an os.Root). Errors are *FileError naming the file and the line.
//
// Chats: an agent file of kind: chat (KindChat) is an assistant that
// keeps its thread's conversation. Its state is {messages} under the
// messages reducer (add_messages: appended, replaced by id, removed with
// {type: remove, id}), kept from run to run; a run's input is messages
// (ChatMessages: LangGraph's shapes, the role shape, or a plain string).
// Node agent gives the model the system prompt and instructions, then the
// whole conversation, and adds its reply ({id, type: ai, content,
// tool_calls}, id the reply's stream id); while the reply calls tools, node
// tools runs them (each result journaled) and adds {type: tool} messages,
// and agent answers again. approve_tools: (all, or tool names) makes the
// calls of those tools wait for a person: tools raises an interrupt whose
// value is LangChain's HITLRequest (review_format: agent-inbox: agent-inbox's
// HumanInterrupt list) and applies the answers — a HITLResponse's decisions
// (approve, edit, reject), agent-inbox's HumanResponses (accept, edit,
// response, ignore), or a flow.Approval, which maps to them —
// which File.CheckResume checks before a server stores anything.
// interrupt_before: [tools] pauses before every round of tool calls
// instead (a static pause); a call left without a result (rejected, or
// passed by a new message) is answered "not run" to the model. A chat has no
// chain, schemas, output file or handoff, and runs at a thread's root.
// RunConfig.Conversations keeps conversations decoded from run to run.
//
// Approvals: interrupt_before: [step ids] pauses before those steps;
// approval: {timeout, fallback} answers a pause nobody answered in time,
// and approval.response_schema is the JSON Schema of the value a person
// answers with (an edit's value, a command's resume): the name of a
// schema under schemas: (approval: {response_schema: Edit}) or a schema
// inline (approval: {response_schema: {type: object, required: [note]}}).
// The pauses carry it (flow.Options.ResponseSchemas) and an answer that
// does not fit is refused before anything is stored; a bad schema is an
// error naming the file and line when the file loads (a schema file
// named under schemas: when it is prepared, as every schema file is).
//
// Models and tools: model.provider names a provider of a model.Registry
// (the built-in openai-compatible, anthropic and scripted, or a Go
// program's own, RunConfig.Models); tools: names built-in tools
// (read_file, write_file, list_files) or a Go program's own
// (RunConfig.Tools). Both are checked before anything is stored.
//
// Memory: the built-in tools memory_put, memory_get, memory_search and
// memory_delete keep items in the long-term memory store (RunConfig.Items,
// default the store's), across threads, in the namespace memory: names —
// labels with {agent}, {thread}, {metadata.KEY}, {configurable.KEY} and
// {context.KEY} filled in when a tool runs — in the tenant of the run's
// thread; memory.ttl (minutes) and
// memory.search_limit tune them. What they write is redacted like state.
//
// Secrets (the defaults of package redact, the file's secrets:, the API
// key values) are redacted before anything is stored, shown or written.
// Gate pipelines, which run agent files gate by gate, are in package
// pipeline.
package agentfile
