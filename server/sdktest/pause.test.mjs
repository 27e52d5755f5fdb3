// LangGraph's semantics at a pause, through the official LangGraph JS SDK
// against a real `cairn serve --assistants examples/serve` (CAIRN_URL): on
// the approval agent (interrupt_before: send), a person edits the draft
// with updateState (no asNode) and a run with no input sends it. Run by
// `go test ./cmd/cairn -run LangGraphSDKPause`, which starts the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.CAIRN_URL;
if (!apiUrl) throw new Error("CAIRN_URL is not set (go test ./cmd/cairn -run LangGraphSDKPause sets it)");
const client = new Client({ apiUrl, apiKey: process.env.CAIRN_API_KEY ?? null });

const EDIT = "EDITED BY A PERSON: your order left our warehouse today and reaches you on Tuesday. ".repeat(5).trim();

// pausedThread runs the approval agent on a new thread until it pauses
// before send.
async function pausedThread() {
  const thread = await client.threads.create();
  const out = await client.runs.wait(thread.thread_id, "approval", { input: "Where is my order?" });
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted", "the first run pauses before send");
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["send"]);
  assert.match(state.values.steps.draft, /ships on Monday/);
  return { thread: thread.thread_id, draft: state.values.steps.draft };
}

// modelCalls lists the model calls the thread's history records, oldest
// first: every step that ran a chain step (source "loop") with its
// tokens, as its checkpoint's metadata holds them.
async function modelCalls(thread) {
  const history = await client.threads.getHistory(thread, { limit: 100 });
  return history
    .filter((h) => h.metadata.source === "loop" && h.metadata.cairn.tokens)
    .reverse()
    .map((h) => ({ nodes: h.metadata.cairn.nodes, input: h.metadata.cairn.tokens.input }));
}

test("an edit at the pause, without asNode, is written as draft and a run with no input sends it without drafting again", async () => {
  const { thread, draft } = await pausedThread();

  await client.threads.updateState(thread, { values: { steps: { draft: EDIT } } });
  const state = await client.threads.getState(thread);
  assert.deepEqual(state.next, ["send"], "send is next: the update is written as draft, not __start__");
  assert.equal(state.metadata.source, "update");
  assert.deepEqual(state.metadata.cairn.nodes, ["draft"]);
  assert.equal(state.values.steps.draft, EDIT);
  await client.threads.update(thread, { metadata: { modified: true } });
  const edited = await client.threads.get(thread);
  assert.equal(edited.status, "interrupted", "the thread stays paused after the edit, until a run sends it");
  assert.deepEqual(state.tasks.map((t) => [t.name, t.interrupts.length]), [["send", 0]], "one task, send, with no interrupt object: a static pause");
  assert.deepEqual(state.tasks[0].path, ["__pregel_pull", "send"]);
  assert.equal(state.tasks[0].result, null);
  assert.equal(edited.metadata.modified, true);
  assert.ok((await client.threads.search({ status: "interrupted", limit: 1000 })).some((t) => t.thread_id === thread), "listings by status agree");

  const done = await client.runs.wait(thread, "approval", { input: null });
  assert.equal(done.steps.draft, EDIT, "the edit is kept");
  assert.match(done.final_output, /^Sent: /);
  assert.equal((await client.threads.get(thread)).status, "idle");

  // The model was called for draft once (the first run) and for send once.
  const calls = await modelCalls(thread);
  assert.deepEqual(calls.map((c) => c.nodes), [["draft"], ["send"]]);

  // send read the edited draft: its prompt (the chain state, as JSON) is
  // longer than an unedited send's by the edit's extra bytes (the scripted
  // model counts a token per 4 bytes).
  const control = await pausedThread();
  await client.runs.wait(control.thread, "approval", { command: { resume: true } });
  const [, plainSend] = await modelCalls(control.thread);
  const grew = calls[1].input - plainSend.input;
  const want = (EDIT.length - draft.length) / 4;
  assert.ok(Math.abs(grew - want) <= 1, `send's prompt grew by ${grew} tokens, want ${want}`);

  // A new run pauses before send again.
  await client.runs.wait(thread, "approval", { input: "And my refund?" });
  assert.deepEqual((await client.threads.getState(thread)).next, ["send"], "a new run pauses before send");
});

test("an edit at the pause written as __start__ drafts again and pauses again", async () => {
  const { thread } = await pausedThread();
  await client.threads.updateState(thread, { values: { steps: { draft: EDIT } }, asNode: "__start__" });
  assert.deepEqual((await client.threads.getState(thread)).next, ["draft"]);
  const out = await client.runs.wait(thread, "approval", { input: null });
  assert.deepEqual((await client.threads.getState(thread)).next, ["send"], "the new draft pauses before send");
  assert.match(out.steps.draft, /ships on Monday/, "draft ran again and replaced the edit");
  assert.deepEqual((await modelCalls(thread)).map((c) => c.nodes), [["draft"], ["draft"]]);
});

test("a streamed run with no input after the edit sends it", async () => {
  const { thread } = await pausedThread();
  await client.threads.updateState(thread, { values: { steps: { draft: EDIT } } });
  const parts = [];
  for await (const p of client.runs.stream(thread, "approval", { input: null, streamMode: ["updates"] })) parts.push(p);
  const updates = parts.filter((p) => p.event === "updates").map((p) => Object.keys(p.data)[0]);
  assert.deepEqual(updates, ["send"], "one step, send, and no interrupt");
  const state = await client.threads.getState(thread);
  assert.equal(state.values.steps.draft, EDIT);
  assert.match(state.values.final_output, /^Sent: /);
});
