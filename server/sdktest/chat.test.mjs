// The official LangGraph JS SDK against a real `cairn serve` (CAIRN_URL)
// serving examples/serve, whose chat.md is a chat assistant (kind: chat):
// what a chat front end (agent-chat-ui, useStream) does. Run by
// `go test ./cmd/cairn -run LangGraphSDKChat`, which starts the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.CAIRN_URL;
if (!apiUrl) throw new Error("CAIRN_URL is not set (go test ./cmd/cairn -run LangGraphSDKChat sets it)");
const client = new Client({ apiUrl });

async function collect(stream) {
  const out = [];
  for await (const part of stream) out.push(part);
  return out;
}

test("the chat assistant's graph and schemas show its messages state", async () => {
  const a = await client.assistants.get("chat");
  assert.equal(a.metadata.kind, "chat");
  const g = await client.assistants.getGraph("chat");
  assert.deepEqual(g.nodes.map((n) => n.id), ["__start__", "agent", "tools", "__end__"]);
  assert.ok(g.edges.some((e) => e.source === "agent" && e.target === "tools" && e.conditional));
  assert.ok(g.edges.some((e) => e.source === "tools" && e.target === "agent" && e.conditional));
  assert.ok(g.edges.some((e) => e.source === "tools" && e.target === "__end__" && e.conditional), "an ignored call ends the turn");
  const s = await client.assistants.getSchemas("chat");
  assert.deepEqual(Object.keys(s.state_schema.properties), ["messages"]);
  assert.deepEqual(Object.keys(s.input_schema.properties), ["messages"]);
  const messages = s.state_schema.properties.messages;
  assert.equal(messages.langgraph_type, "messages", "front ends find the conversation by langgraph_type");
  assert.equal(messages.type, "array");
  const ref = messages.items.$ref.replace("#/definitions/", "");
  const kinds = s.state_schema.definitions[ref].oneOf.map((o) => s.state_schema.definitions[o.$ref.replace("#/definitions/", "")].properties.type.const);
  assert.deepEqual(kinds.sort(), ["ai", "human", "system", "tool"]);
  assert.equal(s.state_schema.$schema, "http://json-schema.org/draft-07/schema#");
});

test("three turns: the conversation grows, the reply's tokens stream first", async () => {
  const thread = await client.threads.create();
  let ids = [];
  for (const [i, text] of ["hi", "how are you?", "bye"].entries()) {
    const parts = await collect(client.runs.stream(thread.thread_id, "chat", {
      input: { messages: [{ role: "user", content: text }] },
      streamMode: ["messages-tuple", "values"],
    }));
    const chunks = parts.filter((p) => p.event === "messages");
    assert.ok(chunks.length > 0, `turn ${i + 1}: no token chunk`);
    const [chunk, meta] = chunks[0].data;
    assert.equal(chunk.type, "AIMessageChunk");
    assert.equal(meta.langgraph_node, "agent");
    const tokens = chunks.map((p) => p.data[0].content).join("");
    assert.ok(parts.findIndex((p) => p.event === "messages") < parts.findLastIndex((p) => p.event === "values"), "the tokens come before the last values");
    const values = parts.filter((p) => p.event === "values").at(-1).data;
    assert.equal(values.messages.length, 2 * (i + 1), `turn ${i + 1}: ${JSON.stringify(values.messages)}`);
    const [human, ai] = values.messages.slice(-2);
    assert.equal(human.type, "human");
    assert.equal(human.content, text);
    assert.equal(ai.type, "ai");
    assert.equal(ai.content, tokens);
    assert.ok(ai.content.startsWith(`You said: ${text}. `));
    assert.equal(ai.id, chunk.id, "the streamed message and the stored one share their id");
    assert.deepEqual(values.messages.slice(0, ids.length).map((m) => m.id), ids, "earlier messages keep their ids");
    ids = values.messages.map((m) => m.id);
  }
  const state = await client.threads.getState(thread.thread_id);
  assert.equal(state.values.messages.length, 6);
  assert.deepEqual(state.next, []);
});

// review starts a turn whose tool call waits for review and returns the
// thread, the waiting call and the interrupt a chat front end shows.
async function review(text) {
  const thread = await client.threads.create();
  const parts = await collect(client.runs.stream(thread.thread_id, "chat", {
    input: { messages: [{ type: "human", content: text }] },
    streamMode: ["values"],
  }));
  const last = parts.filter((p) => p.event === "values").at(-1).data;
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["tools"]);
  const call = state.values.messages.at(-1).tool_calls[0];
  assert.equal(call.name, "list_files");
  const interrupt = last.__interrupt__?.[0] ?? state.tasks[0].interrupts[0];
  return { thread, call, interrupt, state };
}

async function answer(thread, resume) {
  const parts = await collect(client.runs.stream(thread.thread_id, "chat", {
    input: {},
    command: { resume },
    streamMode: ["messages-tuple", "values"],
  }));
  const errors = parts.filter((p) => p.event === "error");
  assert.deepEqual(errors, []);
  return parts.filter((p) => p.event === "values").at(-1).data;
}

test("stream mode events: LangChain's event stream, the model's tokens as on_chat_model_stream", async () => {
  const thread = await client.threads.create();
  const parts = await collect(client.runs.stream(thread.thread_id, "chat", {
    input: { messages: [{ role: "user", content: "hi" }] },
    streamMode: "events",
  }));
  assert.deepEqual([...new Set(parts.map((p) => p.event))].sort(), ["events", "metadata"]);
  const evs = parts.filter((p) => p.event === "events").map((p) => p.data);
  assert.deepEqual([...new Set(evs.map((e) => e.event))].sort(),
    ["on_chain_end", "on_chain_start", "on_chat_model_end", "on_chat_model_start", "on_chat_model_stream"]);
  assert.equal(evs[0].event, "on_chain_start");
  assert.equal(evs.at(-1).event, "on_chain_end");
  const tokens = evs.filter((e) => e.event === "on_chat_model_stream").map((e) => e.data.chunk.content).join("");
  const end = evs.find((e) => e.event === "on_chat_model_end");
  assert.equal(end.data.output.content, tokens);
  const state = await client.threads.getState(thread.thread_id);
  assert.equal(state.values.messages.at(-1).content, tokens, "the streamed tokens are the reply");
});

test("a tool call waits for review (LangChain's HITLRequest, as agent-chat-ui reads it); approved, it runs and the model answers with its result", async () => {
  const { thread, call, interrupt } = await review("Which files are there?");
  assert.deepEqual(interrupt.value, {
    action_requests: [{ name: "list_files", args: { dir: "." }, description: interrupt.value.action_requests[0].description }],
    review_configs: [{ action_name: "list_files", allowed_decisions: ["approve", "edit", "reject"] }],
  });
  assert.match(interrupt.value.action_requests[0].description, /list_files/);
  const values = await answer(thread, { decisions: [{ type: "approve" }] });
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool", "ai"]);
  assert.equal(values.messages[2].tool_call_id, call.id);
  assert.match(values.messages[3].content, /chat\.md/);
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, []);
});

test("an edit decision runs the call with the edited arguments, which the reply's call then shows", async () => {
  const { thread, call } = await review("review: edit");
  const values = await answer(thread, { decisions: [{ type: "edit", edited_action: { name: "list_files", args: { dir: "replies" } } }] });
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool", "ai"]);
  assert.deepEqual(values.messages[1].tool_calls[0].args, { dir: "replies" });
  assert.equal(values.messages[1].tool_calls[0].id, call.id);
  assert.match(values.messages[3].content, /chat\.yaml/);
  assert.doesNotMatch(values.messages[3].content, /chat\.md/);
});

test("a reject decision does not run the tool: the model reads its message", async () => {
  const { thread } = await review("review: respond");
  const values = await answer(thread, { decisions: [{ type: "reject", message: "Not in this folder." }] });
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool", "ai"]);
  assert.equal(values.messages[2].content, "Not in this folder.");
  assert.equal(values.messages[2].status, "error");
  assert.equal(values.messages[3].content, "Not in this folder.");
});

test("agent-inbox's answers are read too: an edit as a HumanResponse", async () => {
  const { thread, call } = await review("review: edit");
  const values = await answer(thread, [{ type: "edit", args: { action: "list_files", args: { dir: "replies" } } }]);
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool", "ai"]);
  assert.deepEqual(values.messages[1].tool_calls[0].args, { dir: "replies" });
  assert.equal(values.messages[1].tool_calls[0].id, call.id);
  assert.match(values.messages[3].content, /chat\.yaml/);
});

test("a response does not run the tool: the model reads the person's text", async () => {
  const { thread } = await review("review: respond");
  const values = await answer(thread, { type: "response", args: "Not now, please." });
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool", "ai"]);
  assert.equal(values.messages[2].content, "Not now, please.");
  assert.equal(values.messages[2].status, "error");
  assert.equal(values.messages[3].content, "Not now, please.");
});

test("an ignored call ends the turn without a further model call", async () => {
  const { thread } = await review("review: ignore");
  const values = await answer(thread, [{ type: "ignore", args: null }]);
  assert.deepEqual(values.messages.map((m) => m.type), ["human", "ai", "tool"]);
  assert.match(values.messages[2].content, /ignored/);
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, []);
});

test("an answer that does not fit the review is refused (422) and the thread still waits", async () => {
  const { thread, state } = await review("Which files are there?");
  await assert.rejects(
    collect(client.runs.stream(thread.thread_id, "chat", { input: {}, command: { resume: [{ type: "maybe", args: null }] } })),
    (err) => err.status === 422 || /422|resume\[0\]\.type/.test(String(err?.message ?? err)),
  );
  await assert.rejects(
    collect(client.runs.stream(thread.thread_id, "chat", { command: { resume: { decisions: [{ type: "accept" }] } } })),
    (err) => err.status === 422 || /422|decisions\[0\]\.type/.test(String(err?.message ?? err)),
  );
  const after = await client.threads.getState(thread.thread_id);
  assert.equal(after.checkpoint.checkpoint_id, state.checkpoint.checkpoint_id);
  assert.deepEqual(after.next, ["tools"]);
});
