// The official JS SDK's thread-centric client (client.threads.stream(),
// LangGraph's "v2" protocol) against Go graphs served by the server
// package: "agent", a tool-calling agent, and "weather", a router whose
// subgraph pauses inside. Run against CAIRN_URL (go test ./cmd/cairn -run
// TestLangGraphSDKProtocol).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

// Streams a failed test left open must not keep the process alive.
const open = [];
const stream = (assistantId) => {
  const t = client.threads.stream({ assistantId });
  open.push(t);
  return t;
};
after(async () => {
  await Promise.all(open.map((t) => t.close().catch(() => {})));
});

test("a run over the protocol: its values, its tool calls, its state and checkpoints", { timeout: 20000 }, async () => {
  const thread = stream("agent");
  const calls = [];
  const watching = (async () => {
    for await (const tc of thread.toolCalls) calls.push(tc);
  })();
  const seen = [];
  const values = (async () => {
    for await (const v of thread.values) seen.push(v);
  })();
  await thread.run.start({ input: { messages: [{ role: "user", content: "begin" }] } });
  const out = await thread.output;
  const types = (out.messages ?? []).map((m) => (typeof m.getType === "function" ? m.getType() : m.type));
  assert.deepEqual(types, ["human", "ai", "tool", "ai"], JSON.stringify(out));
  const state = await thread.state.get({ namespace: [] });
  assert.equal(state.values.messages.length, 4);
  assert.match(state.checkpoint.id, /^[0-9a-f-]{36}$/);
  const list = await thread.state.listCheckpoints({ limit: 20 });
  assert.ok(list.checkpoints.length >= 5, JSON.stringify(list));
  assert.ok(list.checkpoints.some((c) => c.metadata.source === "input" && c.step === -1), "the input view is listed");
  const tree = await thread.agent.getTree({});
  assert.equal(tree.tree.status, "completed");
  await thread.close();
  await Promise.race([Promise.all([watching, values]), new Promise((ok) => setTimeout(ok, 1000))]);
  assert.ok(seen.length >= 2, `values streamed: ${seen.length}`);
  // The assembled call, as it started and as it finished.
  assert.deepEqual([...new Set(calls.map((c) => c.callId))], ["tool_call_id"], JSON.stringify(calls));
  assert.equal(calls.at(-1).name, "tool");
  assert.equal(await calls.at(-1).output, "tool_call__begin");
  // The thread-centric runs are the API's runs: the run-centric client sees them.
  const runs = await client.runs.list(thread.threadId);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].status, "success");
});

test("a subgraph paused inside over the protocol: its events in its namespace, the run resumed", { timeout: 20000 }, async () => {
  const thread = stream("weather");
  const updates = [];
  const watching = (async () => {
    for await (const e of await thread.subscribe(["updates"])) updates.push(e);
  })();
  await thread.run.start({ input: {} });
  await thread.output;
  assert.equal(thread.interrupted, true, "the run ended at the subgraph's pause (interrupt_before inside)");
  const st = await client.threads.getState(thread.threadId);
  assert.deepEqual(st.next, ["weather_graph"]);
  // A pause before a node asks no question: the thread goes on with a run
  // without input (one with input would start over).
  await thread.run.start({ input: null });
  await thread.output;
  const runs = await client.runs.list(thread.threadId);
  assert.equal(runs.length, 2);
  await client.runs.join(thread.threadId, runs[0].run_id);
  const after = await client.threads.getState(thread.threadId);
  assert.deepEqual(after.next, [], JSON.stringify(after));
  assert.equal(after.values.route, "weather");
  await thread.close();
  await Promise.race([watching, new Promise((ok) => setTimeout(ok, 1000))]);
  const inner = updates.filter((e) => e.params.namespace.length === 1);
  assert.ok(inner.length > 0 && inner.every((e) => /^weather_graph:/.test(e.params.namespace[0])), `the subgraph's updates in its namespace: ${JSON.stringify(updates.map((e) => e.params.namespace))}`);
});
