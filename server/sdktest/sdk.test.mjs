// The official LangGraph JS SDK against a real `cairn serve` (CAIRN_URL),
// serving examples/serve: the approval agent (interrupt_before: send) and
// the five-steps agent. Run by `go test ./cmd/cairn -run LangGraphSDK`,
// which starts the server.
import { test } from "node:test";
import { createServer } from "node:http";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.CAIRN_URL;
if (!apiUrl) throw new Error("CAIRN_URL is not set (go test ./cmd/cairn -run LangGraphSDK sets it)");
const client = new Client({ apiUrl, apiKey: process.env.CAIRN_API_KEY ?? null });

async function collect(stream) {
  const out = [];
  for await (const part of stream) out.push(part);
  return out;
}

test("assistants: search, get, graph, schemas", async () => {
  const list = await client.assistants.search({ limit: 10 });
  const ids = list.map((a) => a.assistant_id).sort();
  assert.deepEqual(ids, ["approval", "chat", "five-steps", "slow-steps"]);
  const a = await client.assistants.get("approval");
  assert.equal(a.graph_id, "approval");
  const g = await client.assistants.getGraph("approval");
  assert.deepEqual(g.nodes.map((n) => n.id), ["__start__", "draft", "send", "__end__"]);
  assert.ok(g.edges.some((e) => e.source === "draft" && e.target === "send"));
  const draft = g.nodes.find((n) => n.id === "draft");
  assert.equal(draft.type, "runnable");
  assert.equal(draft.data.name, "draft", "a node is drawn as LangGraph draws a runnable: data {id, name}");
  assert.equal(g.nodes[0].type, "schema");
  const s = await client.assistants.getSchemas("five-steps");
  assert.equal(s.graph_id, "five-steps");
  assert.ok("final_output" in s.state_schema.properties);
});

test("a run streams, stops for approval, resumes with a command, and its history forks", async () => {
  const thread = await client.threads.create({ metadata: { customer: "acme", suite: "sdk" } });
  assert.equal(thread.status, "idle");

  // Stream the first run: it drafts, then stops before "send".
  const parts = await collect(client.runs.stream(thread.thread_id, "approval", {
    input: "Where is my order?",
    streamMode: ["values", "updates", "messages-tuple"],
  }));
  assert.equal(parts[0].event, "metadata");
  const runId = parts[0].data.run_id;
  const events = parts.map((p) => p.event);
  assert.ok(events.includes("values"), events.join(","));
  const tokens = parts.filter((p) => p.event === "messages").map((p) => p.data[0].content).join("");
  assert.match(tokens, /your order ships on Monday/);
  // A static pause (interrupt_before) has no interrupt object, as in
  // LangGraph: an empty __interrupt__ update, and the next node.
  const interrupt = parts.find((p) => p.event === "updates" && p.data.__interrupt__);
  assert.ok(interrupt, "an __interrupt__ update");
  assert.deepEqual(interrupt.data.__interrupt__, []);

  let t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "interrupted");
  assert.equal(Object.values(t.interrupts).flat().length, 0);
  let state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["send"]);
  assert.equal(state.tasks[0].name, "send");
  assert.equal(state.tasks[0].interrupts.length, 0);
  assert.match(state.values.steps.draft, /ships on Monday/);

  const run = await client.runs.get(thread.thread_id, runId);
  assert.equal(run.status, "interrupted");

  // Resume with a command: the run sends.
  const done = await client.runs.wait(thread.thread_id, "approval", { command: { resume: { approved: true } } });
  assert.match(done.final_output, /^Sent: /);
  t = await client.threads.get(thread.thread_id);
  assert.equal(t.status, "idle");

  // History, newest first: the send step, the interrupt, the draft, the input.
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.ok(history.length >= 4, `history of ${history.length}`);
  assert.equal(history[0].values.final_output, done.final_output);
  // The draft's checkpoint: the oldest whose next is send (the pause's own
  // checkpoint, newer, has the same next and, as a static pause, no
  // interrupt object either).
  const afterDraft = history.findLast((h) => h.next.length === 1 && h.next[0] === "send" && h.tasks.every((x) => x.interrupts.length === 0));
  assert.ok(afterDraft, "the checkpoint after the draft");
  const before = await client.threads.getHistory(thread.thread_id, { limit: 2, before: { configurable: { checkpoint_id: history[0].checkpoint.checkpoint_id } } });
  assert.equal(before[0].checkpoint.checkpoint_id, history[1].checkpoint.checkpoint_id);

  // Fork from that checkpoint with an edited draft, then run the fork.
  const fork = await client.threads.updateState(thread.thread_id, {
    values: { steps: { draft: "EDITED: ships Tuesday" } },
    checkpointId: afterDraft.checkpoint.checkpoint_id,
    asNode: "draft",
  });
  const forkId = (fork.checkpoint ?? fork.configurable).checkpoint_id;
  state = await client.threads.getState(thread.thread_id);
  assert.equal(state.checkpoint.checkpoint_id, forkId);
  assert.equal(state.parent_checkpoint.checkpoint_id, afterDraft.checkpoint.checkpoint_id);
  assert.equal(state.values.steps.draft, "EDITED: ships Tuesday");
  assert.deepEqual(state.next, ["send"]);
  // A person made the update: the run from it sends without pausing again.
  const forked = await client.runs.wait(thread.thread_id, "approval", {});
  assert.equal((await client.threads.get(thread.thread_id)).status, "idle", "the fork's run goes through send");
  assert.equal(forked.steps.draft, "EDITED: ships Tuesday");
  assert.match(forked.final_output, /^Sent: /);
  const atFork = await client.threads.getState(thread.thread_id, forkId);
  assert.equal(atFork.values.steps.draft, "EDITED: ships Tuesday");
  // The original branch is still there.
  const orig = await client.threads.getState(thread.thread_id, history[0].checkpoint.checkpoint_id);
  assert.match(orig.values.steps.draft, /ships on Monday/);

  // Copy, then search.
  const copy = await client.threads.copy(thread.thread_id);
  assert.notEqual(copy.thread_id, thread.thread_id);
  assert.deepEqual(copy.values, (await client.threads.get(thread.thread_id)).values);
  assert.equal(copy.metadata.customer, "acme");
  const found = await client.threads.search({ metadata: { customer: "acme" }, limit: 10 });
  const foundIds = found.map((x) => x.thread_id);
  assert.ok(foundIds.includes(thread.thread_id) && foundIds.includes(copy.thread_id), foundIds.join(","));
  const idle = await client.threads.search({ metadata: { suite: "sdk" }, status: "interrupted" });
  assert.ok(!idle.some((x) => x.thread_id === thread.thread_id));
  await client.threads.update(thread.thread_id, { metadata: { reviewed: true } });
  assert.equal((await client.threads.get(thread.thread_id)).metadata.reviewed, true);

  const runs = await client.runs.list(thread.thread_id);
  assert.equal(runs.length, 3);
});

test("a stream rejoined with Last-Event-ID gets what it missed, once, and no step runs twice", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "five-steps", { input: "checkpoints", streamMode: ["values", "updates"] });
  // Read the first events, then leave.
  const ctrl = new AbortController();
  const first = [];
  try {
    for await (const p of client.runs.joinStream(thread.thread_id, run.run_id, { signal: ctrl.signal })) {
      first.push(p);
      if (first.length === 3) ctrl.abort();
    }
  } catch (e) {
    if (e.name !== "AbortError") throw e;
  }
  assert.equal(first.length, 3);
  const rest = await collect(client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: first[2].id }));
  const all = [...first, ...rest];
  const seqs = all.map((p) => Number(p.id.split(":")[1]));
  assert.deepEqual(seqs, seqs.map((_, i) => i + 1), "every event once, in order");
  const updates = all.filter((p) => p.event === "updates").map((p) => Object.keys(p.data)[0]);
  assert.deepEqual(updates, ["outline", "draft", "critique", "revise", "summary"]);
  const final = await client.runs.join(thread.thread_id, run.run_id);
  assert.match(final.final_output, /commits every step/);
  const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  // LangGraph's shape: the input checkpoint (next __start__), the input
  // applied (step 0), then each step.
  assert.equal(history.length, 7, "the input, the input applied and five steps, each committed once");
  assert.deepEqual(history.at(-1).next, ["__start__"]);
  assert.deepEqual([history.at(-1).metadata.source, history.at(-1).metadata.step, history.at(-2).metadata.source, history.at(-2).metadata.step], ["input", -1, "loop", 0]);
  // The whole stream again from the start, from the store.
  const again = await collect(client.runs.joinStream(thread.thread_id, run.run_id));
  assert.deepEqual(again.map((p) => p.id), all.map((p) => p.id));
});

test("double texting: reject, enqueue, interrupt", async () => {
  const busy = await client.threads.create();
  const slow = await client.runs.create(busy.thread_id, "slow-steps", { input: "first" });
  await assert.rejects(client.runs.create(busy.thread_id, "slow-steps", { input: "second", multitaskStrategy: "reject" }),
    /HTTP 409: .*busy/);
  await client.runs.join(busy.thread_id, slow.run_id);
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "approval", { input: "first" });
  // A new input on a thread paused for approval is refused: resume it, or replace the run.
  await assert.rejects(client.runs.create(thread.thread_id, "approval", { input: "second" }), /HTTP 409: .*unfinished run/);
  // The thread is interrupted before send: an enqueued resume runs after a resume ahead of it.
  const a = await client.runs.create(thread.thread_id, "approval", { command: { resume: true } });
  const b = await client.runs.create(thread.thread_id, "approval", { input: "again", multitaskStrategy: "enqueue" });
  await client.runs.join(thread.thread_id, a.run_id);
  const bOut = await client.runs.join(thread.thread_id, b.run_id);
  assert.equal(bOut.input.content, "again");
  assert.equal((await client.runs.get(thread.thread_id, a.run_id)).status, "success");
  assert.equal((await client.runs.get(thread.thread_id, b.run_id)).status, "interrupted");
  // interrupt: a new run cancels the one in progress.
  const t2 = await client.threads.create();
  const long = await client.runs.create(t2.thread_id, "slow-steps", { input: "long" });
  const next = await client.runs.create(t2.thread_id, "slow-steps", { input: "next", multitaskStrategy: "interrupt" });
  const nextOut = await client.runs.join(t2.thread_id, next.run_id);
  assert.equal(nextOut.final_output, "three");
  assert.equal((await client.runs.get(t2.thread_id, long.run_id)).status, "interrupted");
  assert.equal((await client.runs.get(t2.thread_id, next.run_id)).status, "success");
  // rollback: the run in progress is deleted and the thread is as before it.
  const t3 = await client.threads.create();
  const gone = await client.runs.create(t3.thread_id, "slow-steps", { input: "rolled back" });
  const kept = await client.runs.create(t3.thread_id, "slow-steps", { input: "kept", multitaskStrategy: "rollback" });
  await client.runs.join(t3.thread_id, kept.run_id);
  await assert.rejects(client.runs.get(t3.thread_id, gone.run_id), /HTTP 404/);
  const t3state = await client.threads.getState(t3.thread_id);
  assert.equal(t3state.values.input.content, "kept");
});

test("stateless runs, cancel, and errors", async () => {
  const out = await client.runs.wait(null, "five-steps", { input: "stateless" });
  assert.match(out.final_output, /commits every step/);

  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "slow-steps", { input: "to cancel" });
  await client.runs.cancel(thread.thread_id, run.run_id, true);
  const r = await client.runs.get(thread.thread_id, run.run_id);
  assert.equal(r.status, "interrupted");
  assert.equal((await client.threads.get(thread.thread_id)).status, "idle");

  await assert.rejects(client.threads.get("no-such-thread"), /HTTP 404/);
  await assert.rejects(client.runs.create(thread.thread_id, "no-such-assistant", { input: "x" }), /HTTP 404/);
  await assert.rejects(client.runs.create(thread.thread_id, "five-steps", { input: "x", streamMode: ["bogus"] }), /HTTP 422: .*stream_mode/);
  const res = await fetch(`${apiUrl}/threads/search`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ limit: "ten" }) });
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.equal(body.path, "$.limit");
  const unknown = await fetch(`${apiUrl}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ metadata: {}, colour: "red" }) });
  assert.equal(unknown.status, 422);
  assert.equal((await unknown.json()).path, "$.colour");
});

test("tasks mode: each task's start with the state it read and its trigger, its end with its update", async () => {
  const thread = await client.threads.create();
  const parts = [];
  for await (const p of client.runs.stream(thread.thread_id, "five-steps", { input: "x", streamMode: ["tasks", "updates"] })) parts.push(p);
  const tasks = parts.filter((p) => p.event === "tasks").map((p) => p.data);
  const starts = tasks.filter((t) => "triggers" in t);
  const ends = tasks.filter((t) => "result" in t);
  assert.ok(starts.length >= 5 && starts.length === ends.length, `${starts.length} starts, ${ends.length} ends`);
  for (const s of starts) {
    assert.deepEqual(s.triggers, [`branch:to:${s.name}`]);
    assert.equal(typeof s.input, "object", JSON.stringify(s));
    assert.ok(s.input && "input" in s.input, "a task's input is the state it read");
  }
  const updates = parts.filter((p) => p.event === "updates").map((p) => p.data);
  for (const e of ends) {
    assert.equal(e.error, null);
    assert.ok(updates.some((u) => JSON.stringify(u[e.name]) === JSON.stringify(e.result)), `the result of ${e.name} is its update`);
    assert.ok(starts.some((s) => s.id === e.id), "a result has its start's id");
  }
});

test("a run's webhook receives the run and its values when it ends", async () => {
  let hook;
  const srv = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      res.end("ok");
      hook = JSON.parse(body);
    });
  });
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${srv.address().port}/hook`;
    const thread = await client.threads.create();
    const out = await client.runs.wait(thread.thread_id, "five-steps", { input: "x", webhook: url });
    for (let i = 0; i < 100 && !hook; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(hook, "the webhook was posted");
    assert.equal(hook.thread_id, thread.thread_id);
    assert.equal(hook.status, "success");
    assert.equal(hook.assistant_id, "five-steps");
    assert.deepEqual(hook.values, out);
    await assert.rejects(client.runs.create(thread.thread_id, "five-steps", { input: "x", webhook: "ftp://nowhere/x" }), (e) => e.status === 422);
  } finally {
    srv.close();
  }
});
