// Go graphs served by the server package, driven by the official
// LangGraph JS SDK: the shapes and semantics LangGraph's own server suite
// checks of a run's checkpoints, messages, pauses and subgraphs. Run
// against CAIRN_URL (go test ./cmd/cairn -run TestLangGraphSDKGoGraphs
// serves "agent", a tool-calling agent, "weather", a router whose
// subgraph pauses inside, and "configured", a graph its factory builds
// from each run's config, beside a route of the program's own at
// /custom/hook).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

async function collect(stream) {
  const out = [];
  for await (const part of stream) out.push(part);
  return out;
}

test("a run's first checkpoints are LangGraph's: the input checkpoint, then the input applied", async () => {
  const thread = await client.threads.create();
  const parts = await collect(client.runs.stream(thread.thread_id, "agent", {
    input: { messages: [{ role: "user", content: "hi" }] },
    streamMode: ["checkpoints", "tasks"],
  }));
  const cps = parts.filter((p) => p.event === "checkpoints").map((p) => p.data);
  assert.deepEqual(cps[0].values, { messages: [] }, "the state before the input: its list fields empty");
  assert.deepEqual([cps[0].metadata.source, cps[0].metadata.step, cps[0].next], ["input", -1, ["__start__"]]);
  assert.deepEqual([cps[1].metadata.source, cps[1].metadata.step, cps[1].next], ["loop", 0, ["agent"]]);
  assert.equal(cps[1].values.messages[0].type, "human", "a role names the message's type");
  assert.equal(cps[1].parent_config.configurable.checkpoint_id, cps[0].config.configurable.checkpoint_id);
  assert.deepEqual(cps.map((c) => c.metadata.step), [-1, 0, 1, 2, 3]);
  const tasks = parts.filter((p) => p.event === "tasks").map((p) => p.data.name);
  assert.deepEqual(tasks, ["agent", "agent", "tool", "tool", "agent", "agent"], "no task for __start__");

  const history = await client.threads.getHistory(thread.thread_id);
  assert.equal(history.length, 5);
  const view = history.at(-1);
  assert.deepEqual([view.next, view.metadata.source, view.tasks[0].name], [["__start__"], "input", "__start__"]);
  const again = await client.threads.getState(thread.thread_id, view.checkpoint.checkpoint_id);
  assert.deepEqual(again.values, { messages: [] });

  // A second run's input checkpoint holds the state the first left.
  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "again" }] } });
  const full = await client.threads.getHistory(thread.thread_id, { limit: 20 });
  assert.equal(full.length, 10);
  const second = full.find((s) => s.metadata.source === "input" && s.values.messages.length === 4);
  assert.ok(second, "the second run's input checkpoint shows the first run's end");
  const before = await client.threads.getHistory(thread.thread_id, { before: second.checkpoint.checkpoint_id, limit: 20 });
  assert.equal(before.length, 5, "before the second input: the first run");

  // From an input checkpoint, a run with input starts from the state before it.
  const fork = await client.runs.wait(thread.thread_id, "agent", {
    input: { messages: [{ role: "user", content: "instead" }] },
    checkpointId: second.checkpoint.checkpoint_id,
  });
  assert.deepEqual(fork.messages.map((m) => m.content), ["hi", "begin", "tool_call__begin", "end", "instead", "begin", "tool_call__begin", "end"]);
});

test("updates show the ids the reducer gives messages: a thread rebuilt from them is the same", async () => {
  const thread = await client.threads.create();
  const parts = await collect(client.runs.stream(thread.thread_id, "agent", {
    input: { messages: [{ role: "human", content: "foo" }] },
    streamMode: ["updates"],
  }));
  const updates = parts.filter((p) => p.event === "updates").map((p) => p.data);
  const state = await client.threads.getState(thread.thread_id);
  const streamed = updates.flatMap((u) => Object.values(u).flatMap((v) => v.messages));
  assert.deepEqual(streamed.map((m) => m.id), state.values.messages.slice(1).map((m) => m.id));
  assert.ok(streamed.every((m) => typeof m.id === "string" && m.id !== ""));

  const history = await client.threads.getHistory(thread.thread_id);
  const clone = await client.threads.create({
    graphId: "agent",
    supersteps: [
      { updates: [{ asNode: "__input__", values: history.at(-2).values }] },
      { updates: [{ asNode: "__start__", values: history.at(-2).values }] },
      ...updates.map((u) => ({ updates: Object.entries(u).map(([asNode, values]) => ({ asNode, values })) })),
    ],
  });
  const cloned = await client.threads.getHistory(clone.thread_id);
  assert.deepEqual(cloned.map(({ next, values }) => ({ next, values })), history.map(({ next, values }) => ({ next, values })));
});

test("a pause before a node is the step's own checkpoint", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "agent", {
    input: { messages: [{ role: "human", content: "foo", id: "initial-message" }] },
    interruptBefore: ["tool"],
  });
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  let history = await client.threads.getHistory(thread.thread_id);
  assert.deepEqual(history.map((s) => s.next), [["tool"], ["agent"], ["__start__"]], "no checkpoint of its own for the pause");
  const last = history[0].values.messages.at(-1);
  await client.threads.updateState(thread.thread_id, { values: { messages: [{ ...last, content: "modified" }] } });
  const edited = await client.threads.getState(thread.thread_id);
  assert.deepEqual([edited.next, edited.values.messages.at(-1).content], [["tool"], "modified"]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  const done = await client.runs.wait(thread.thread_id, "agent", { input: null });
  assert.deepEqual(done.messages.map((m) => m.content), ["foo", "modified", "tool_call__modified", "end"]);
  history = await client.threads.getHistory(thread.thread_id);
  assert.equal(history.length, 6, "the input checkpoint, the input, agent, the update, tool, agent");
});

test("a pause after a node: no interrupt object, the next node next", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "human", content: "foo" }] }, interruptAfter: ["agent"] });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual([state.next, state.tasks.map((t) => t.interrupts), state.interrupts], [["tool"], [[]], []]);
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  assert.equal((await client.threads.getHistory(thread.thread_id)).length, 3, "the input checkpoint, the input, agent");
  const done = await client.runs.wait(thread.thread_id, "agent", { input: null });
  assert.deepEqual(done.messages.map((m) => m.content), ["foo", "begin", "tool_call__begin", "end"]);
});

test("a subgraph paused inside: its own state, read and updated at its namespace", async () => {
  const subgraphs = await client.assistants.getSubgraphs("weather", { recurse: true });
  assert.deepEqual(subgraphs.weather_graph.state.properties.city, { type: "string", enum: ["San Francisco", "LA"] });

  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "weather", { input: {} });
  const state = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["weather_graph"]);
  const task = state.tasks[0];
  assert.match(task.checkpoint.checkpoint_ns, /^weather_graph:/);
  assert.deepEqual(Object.keys(task.checkpoint).sort(), ["checkpoint_ns", "thread_id"]);
  assert.deepEqual(task.interrupts, [], "a pause has no interrupt object");

  const inner = await client.threads.getState(thread.thread_id, task.checkpoint);
  assert.deepEqual([inner.values.city, inner.next], ["San Francisco", ["weather_node"]]);
  await client.threads.updateState(thread.thread_id, { values: { city: "LA" }, checkpoint: task.checkpoint });
  const edited = await client.threads.getState(thread.thread_id, task.checkpoint);
  assert.deepEqual([edited.values.city, edited.next], ["LA", ["weather_node"]]);
  await assert.rejects(
    client.threads.updateState(thread.thread_id, { values: { city: "x" }, checkpoint: { checkpoint_ns: "nope:1" } }),
    (e) => e.status === 422,
  );
  const out = await client.runs.wait(thread.thread_id, "weather", { input: null });
  assert.equal(out.report, "It's sunny in LA!");
  const innerHistory = await client.threads.getHistory(thread.thread_id, { checkpoint: task.checkpoint });
  assert.deepEqual(innerHistory.at(-1).next, ["__start__"]);
  assert.equal(innerHistory[0].values.report, "It's sunny in LA!");
});

test("a webhook that is a path posts to the serving program's own route", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "agent", {
    input: { messages: [{ role: "human", content: "foo" }] },
    webhook: "/custom/hook",
  });
  await client.runs.join(thread.thread_id, run.run_id);
  let got = null;
  for (let i = 0; i < 100 && got?.run_id !== run.run_id; i++) {
    got = await (await fetch(new URL("/custom/last", process.env.CAIRN_URL))).json();
    if (got?.run_id !== run.run_id) await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual([got?.run_id, got?.status], [run.run_id, "success"]);
  // Elsewhere on this machine or a private network: refused, nothing made.
  for (const webhook of ["http://127.0.0.1:9/x", "http://localhost:9/x", "http://169.254.169.254/latest", "http://10.0.0.7/x"]) {
    await assert.rejects(
      client.runs.create(thread.thread_id, "agent", { input: {}, webhook }),
      (e) => e.status === 422 && String(e.message).includes("private"),
    );
  }
  assert.equal((await client.runs.list(thread.thread_id)).length, 1);
});

test("a Go node reads the run's config and context; a factory builds the graph from the config", async () => {
  const assistant = await client.assistants.create({ graphId: "configured", config: { configurable: { user_id: "ada" } }, context: { org: "acme" } });
  const thread = await client.threads.create();
  let out = await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: {} });
  assert.equal(out.greeting, "hello ada of acme from greet");
  out = await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: {}, config: { configurable: { user_id: "bob", node_name: "shout" } } });
  assert.equal(out.greeting, "hello bob of acme from shout", "the run's config over the assistant's; the graph its factory built");
  const history = await client.threads.getHistory(thread.thread_id, { limit: 1 });
  assert.deepEqual(history[0].metadata.cairn.nodes, ["shout"]);
  out = await client.runs.wait(thread.thread_id, "configured", { input: {}, context: { org: "initech" } });
  assert.equal(out.greeting, "hello  of initech from greet", "the graph's own assistant has no config");
});

test("runs in a batch: all checked before any is made", async () => {
  const before = await client.threads.count();
  await assert.rejects(
    client.runs.createBatch([
      { assistantId: "agent", input: { messages: [{ role: "human", content: "one" }] } },
      { assistantId: "agent", input: {}, multitaskStrategy: "sometimes" },
    ]),
    (e) => e.status === 422 && String(e.message).includes("$[1].multitask_strategy"),
  );
  await assert.rejects(client.runs.createBatch([{ assistantId: "agent", input: {} }, { assistantId: "nope", input: {} }]), (e) => e.status === 404);
  assert.equal(await client.threads.count(), before, "a refused batch makes nothing");
  const made = await client.runs.createBatch(["one", "two", "three"].map((content) => ({
    assistantId: "agent", input: { messages: [{ role: "human", content }] }, onCompletion: "keep", // the SDK sends its payloads' camelCase as is
  })));
  assert.equal(made.length, 3);
  assert.equal(new Set(made.map((r) => r.thread_id)).size, 3, "each run on a thread of its own");
  for (const [i, run] of made.entries()) {
    const out = await client.runs.join(run.thread_id, run.run_id);
    assert.deepEqual(out.messages.map((m) => m.content), [["one", "two", "three"][i], "begin", "tool_call__begin", "end"]);
  }
});

test("threads pruned by id: keep_latest keeps the newest state, delete deletes", async () => {
  const thread = await client.threads.create();
  for (const content of ["a", "b"]) await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "human", content }] } });
  const state = await client.threads.getState(thread.thread_id);
  assert.equal((await client.threads.getHistory(thread.thread_id, { limit: 100 })).length, 10);
  await assert.rejects(client.threads.prune([thread.thread_id, "00000000-0000-4000-8000-00000000dead"], { strategy: "keep_latest" }), (e) => e.status === 404);
  assert.equal((await client.threads.getHistory(thread.thread_id, { limit: 100 })).length, 10, "a refused prune prunes nothing");
  assert.deepEqual(await client.threads.prune([thread.thread_id], { strategy: "keep_latest" }), { pruned_count: 1 });
  const left = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  assert.equal(left.length, 1);
  assert.deepEqual(left[0].values, state.values);
  const next = await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "human", content: "c" }] } });
  assert.equal(next.messages.length, 12, "the thread goes on from its kept state");
  assert.deepEqual(await client.threads.prune([thread.thread_id]), { pruned_count: 1 });
  await assert.rejects(client.threads.get(thread.thread_id), (e) => e.status === 404);
  await assert.rejects(client.threads.prune([], { strategy: "keep_latest" }), (e) => e.status === 422);
  await assert.rejects(client.threads.prune([thread.thread_id], { strategy: "some" }), (e) => e.status === 422);
});
