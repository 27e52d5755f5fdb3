// LangGraph's RemoteGraph (@langchain/langgraph/remote), which a LangGraph
// app uses to call a deployed graph as a node or on its own, against a
// real `cairn serve --assistants examples/serve` (CAIRN_URL): invoke,
// stream in several modes, read and update state, list history, and a
// pause surfacing as LangGraph's GraphInterrupt. RemoteGraph always sends
// config.metadata and config.configurable, and adds the updates mode to
// every stream. Run by `go test ./cmd/cairn -run LangGraphSDKPause`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { Client } from "@langchain/langgraph-sdk";

const url = process.env.CAIRN_URL;
if (!url) throw new Error("CAIRN_URL is not set (go test ./cmd/cairn -run LangGraphSDKPause sets it)");
const client = new Client({ apiUrl: url });
const steps = new RemoteGraph({ graphId: "five-steps", url });
const approval = new RemoteGraph({ graphId: "approval", url });

test("invoke runs the graph on a thread and returns its final values", async () => {
  const thread = await client.threads.create();
  const config = { configurable: { thread_id: thread.thread_id, user_id: "ada" }, metadata: { from: "remote" }, tags: ["remote"] };
  const out = await steps.invoke("x", config);
  assert.equal(typeof out.final_output, "string", JSON.stringify(out));
  assert.ok(Object.keys(out.steps).length >= 5, JSON.stringify(out.steps));
  const state = await steps.getState({ configurable: { thread_id: thread.thread_id } });
  assert.deepEqual(state.values, out);
  assert.deepEqual(state.next, []);
  assert.equal(state.config.configurable.thread_id, thread.thread_id);
  const history = [];
  for await (const s of steps.getStateHistory({ configurable: { thread_id: thread.thread_id } })) history.push(s);
  assert.ok(history.length >= 6, `${history.length} checkpoints`);
  assert.deepEqual(history[0].values, out, "the history starts at the head");
});

test("stream yields each mode's chunks as [mode, data]", async () => {
  const thread = await client.threads.create();
  const modes = new Set();
  let updates = 0;
  let last;
  for await (const [mode, data] of await steps.stream("x", { configurable: { thread_id: thread.thread_id }, streamMode: ["values", "updates"] })) {
    modes.add(mode);
    if (mode === "updates") updates++;
    if (mode === "values") last = data;
  }
  assert.deepEqual([...modes].sort(), ["updates", "values"]);
  assert.ok(updates >= 5, `${updates} updates`);
  assert.equal(typeof last.final_output, "string");
});

test("a stateless stream, without a thread", async () => {
  const chunks = [];
  for await (const chunk of await steps.stream("x", { streamMode: "values" })) chunks.push(chunk);
  assert.ok(chunks.length >= 5);
  assert.equal(typeof chunks.at(-1).final_output, "string");
});

test("a pause is LangGraph's GraphInterrupt; updateState and a resume finish the run", async () => {
  const thread = await client.threads.create();
  const config = { configurable: { thread_id: thread.thread_id } };
  await assert.rejects(
    (async () => {
      for await (const _ of await approval.stream("Where is my order?", { ...config, streamMode: "values" })) {
        // the run goes on until it pauses before send
      }
    })(),
    (e) => e.name === "GraphInterrupt",
  );
  let state = await approval.getState(config);
  assert.deepEqual(state.next, ["send"]);
  const edited = await approval.updateState(config, { steps: { draft: "EDITED: it ships today." } });
  assert.equal(edited.configurable.thread_id, thread.thread_id);
  assert.ok(edited.configurable.checkpoint_id, "updateState returns the new checkpoint's config");
  const out = await approval.invoke(null, config);
  assert.match(out.final_output, /^Sent: /);
  assert.equal(out.steps.draft, "EDITED: it ships today.");
  state = await approval.getState(config);
  assert.deepEqual(state.next, []);
});
