// An interrupt's response_schema through the official LangGraph JS SDK.
// Run against CAIRN_URL (go test ./cmd/cairn -run
// TestLangGraphSDKResponseSchema serves "count", a Go graph whose node
// asks {count: an integer 1 to 10} with a response schema).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

test("a response_schema shows with the interrupt, refuses a bad answer and takes a good one", async () => {
  const thread = await client.threads.create();
  const paused = await client.runs.wait(thread.thread_id, "count", { input: {} });
  const [interrupt] = paused.__interrupt__;
  assert.equal(interrupt.value, "how many?");
  assert.equal(interrupt.response_schema.properties.count.type, "integer", "run output");

  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.tasks[0].interrupts[0].response_schema, interrupt.response_schema, "tasks[].interrupts[]");
  assert.deepEqual(state.interrupts[0].response_schema, interrupt.response_schema, "the state's interrupts");

  const pending = await (await fetch(`${process.env.CAIRN_URL}/interrupts?status=pending`)).json(); // Cairn's route: the SDK has no method for it
  const mine = pending.find((p) => p.thread_id === thread.thread_id);
  assert.equal(mine.interrupt_id, interrupt.id);
  assert.deepEqual(mine.response_schema, interrupt.response_schema, "GET /interrupts");

  await assert.rejects(
    client.runs.wait(thread.thread_id, "count", { command: { resume: { count: "two" } } }),
    (err) => err.status === 422 && /\$\.command\.resume\.count/.test(err.message) && err.message.includes(interrupt.id),
    "a resume that does not fit is a 422 naming the interrupt and the place",
  );
  const answer = await fetch(`${process.env.CAIRN_URL}/threads/${thread.thread_id}/interrupts/${interrupt.id}/answer`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ action: "edit", value: { count: 99 } }),
  });
  assert.equal(answer.status, 422);
  assert.match((await answer.json()).detail, /count/);
  const after = await client.threads.getState(thread.thread_id);
  assert.equal(after.checkpoint.checkpoint_id, state.checkpoint.checkpoint_id, "the thread did not move");
  assert.equal((await client.runs.list(thread.thread_id)).length, 1, "no run was made");

  const done = await client.runs.wait(thread.thread_id, "count", { command: { resume: { count: 3 } } });
  assert.equal(done.count, 3);
  assert.equal((await client.threads.getState(thread.thread_id)).next.length, 0);
});
