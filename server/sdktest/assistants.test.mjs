// Assistants as LangGraph has them, through the official LangGraph JS SDK:
// made from a served graph with their own config, context, name and
// metadata; every update a new version; versions listed, filtered and
// made latest; deleted with their threads; searched with the system
// assistants (the served files, metadata.created_by "system"); and an
// assistant's config and context reaching its runs. Run against a real
// `cairn serve` (CAIRN_URL) serving the "memo" agent, whose memory
// namespace is [notes, {configurable.user_id}, {context.org}] (go test
// ./cmd/cairn -run TestLangGraphSDKRunConfig writes it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

const status = (code, text) => (e) => e.status === code && (!text || String(e.message).includes(text));

test("create, read, update, delete", async () => {
  const config = { configurable: { model_name: "gpt" } };
  let a = await client.assistants.create({ graphId: "memo", config, description: "foo" });
  assert.equal(a.graph_id, "memo");
  assert.deepEqual(a.config, config);
  assert.equal(a.description, "foo");
  assert.equal(a.version, 1);
  assert.equal(a.name, "memo", "a name defaults to the graph's");
  await client.assistants.update(a.assistant_id, { metadata: { name: "woof" }, description: "bar" });
  await client.assistants.update(a.assistant_id, { metadata: { more: 1 } });
  a = await client.assistants.get(a.assistant_id);
  assert.deepEqual(a.config, config, "an update without config keeps it");
  assert.deepEqual(a.metadata, { name: "woof", more: 1 }, "metadata is merged");
  assert.equal(a.description, "bar");
  assert.equal(a.version, 3);
  await client.assistants.delete(a.assistant_id);
  await assert.rejects(client.assistants.get(a.assistant_id), status(404, "Assistant not found"));
  await assert.rejects(client.assistants.getVersions(a.assistant_id), status(404));
});

test("an id given, and if_exists", async () => {
  const id = randomUUID();
  const a = await client.assistants.create({ graphId: "memo", assistantId: id, name: "first" });
  assert.equal(a.assistant_id, id);
  await assert.rejects(client.assistants.create({ graphId: "memo", assistantId: id, name: "second" }), status(409, "already exists"));
  const same = await client.assistants.create({ graphId: "memo", assistantId: id, name: "second", ifExists: "do_nothing" });
  assert.equal(same.name, "first", "do_nothing returns the assistant as it was");
  await assert.rejects(client.assistants.create({ graphId: "memo", assistantId: "memo" }), status(409, "system assistant"));
  await client.assistants.delete(id);
});

test("bad input is refused, naming the field, and stores nothing", async () => {
  const before = await client.assistants.count();
  await assert.rejects(client.assistants.create({ graphId: "no-such-graph" }), status(422, "$.graph_id"));
  await assert.rejects(client.assistants.create({ graphId: "memo", ifExists: "sometimes" }), status(422, "$.if_exists"));
  await assert.rejects(client.assistants.create({ graphId: "memo", assistantId: "bad id!" }), status(422, "$.assistant_id"));
  assert.equal(await client.assistants.count(), before);
  const a = await client.assistants.create({ graphId: "memo" });
  await assert.rejects(client.assistants.update(a.assistant_id, { graphId: "no-such-graph" }), status(422, "$.graph_id"));
  await assert.rejects(client.assistants.getVersions(a.assistant_id, { limit: 0 }), status(422, "$.limit"));
  await assert.rejects(client.assistants.setLatest(a.assistant_id, 7), status(404, "version"));
  await assert.rejects(client.assistants.update("memo", { name: "x" }), status(409, "system assistant"));
  await assert.rejects(client.assistants.delete("memo"), status(409, "system assistant"));
  assert.equal((await client.assistants.getVersions(a.assistant_id)).length, 1, "a refused update made no version");
  await client.assistants.delete(a.assistant_id);
});

test("versions: every update one, newest first, filtered, and set latest", async () => {
  const a = await client.assistants.create({ graphId: "memo" });
  const id = a.assistant_id;
  assert.deepEqual((await client.assistants.getVersions(id)).map((v) => v.version), [1]);
  await client.assistants.update(id, { config: { configurable: { foo: "bar" } } });
  let vs = await client.assistants.getVersions(id);
  assert.deepEqual(vs.map((v) => v.version), [2, 1]);
  assert.deepEqual(vs[0].config, { configurable: { foo: "bar" } });
  assert.deepEqual((await client.assistants.getVersions(id, { limit: 1 })).map((v) => v.version), [2]);
  assert.deepEqual((await client.assistants.getVersions(id, { offset: 1 })).map((v) => v.version), [1]);
  await client.assistants.update(id, { metadata: { foo: "baz" } });
  assert.deepEqual((await client.assistants.getVersions(id, { metadata: { foo: "baz" } })).map((v) => v.version), [3]);
  await client.assistants.update(id, {});
  assert.deepEqual((await client.assistants.getVersions(id)).map((v) => v.version), [4, 3, 2, 1], "an empty update is a version too");

  const latest = await client.assistants.setLatest(id, 1);
  assert.equal(latest.version, 1);
  assert.deepEqual(latest.config, {}, "version 1's config");
  const got = await client.assistants.get(id);
  assert.equal(got.version, 1);
  assert.deepEqual(got.metadata, {});
  await client.assistants.update(id, { name: "renamed" });
  vs = await client.assistants.getVersions(id);
  assert.deepEqual(vs.map((v) => v.version), [5, 4, 3, 2, 1], "numbers go on after a set latest");
  assert.equal(vs[0].name, "renamed");
  assert.deepEqual(vs[0].config, {}, "version 5 is made from the latest, version 1");
  await client.assistants.delete(id);
});

test("search and count: system assistants and the caller's", async () => {
  const tag = randomUUID();
  const mine = await client.assistants.create({ graphId: "memo", name: "Tea Keeper " + tag, metadata: { tag } });
  const system = await client.assistants.search({ metadata: { created_by: "system" } });
  assert.ok(system.some((s) => s.assistant_id === "memo" && s.graph_id === "memo"), JSON.stringify(system));
  assert.ok(system.every((s) => s.assistant_id !== mine.assistant_id));
  const byGraph = await client.assistants.search({ graphId: "memo", limit: 100 });
  assert.ok(byGraph.length >= 2 && byGraph.every((s) => s.graph_id === "memo"));
  for (const name of ["tea keeper " + tag, "TEA KEEPER", tag.slice(3, 12).toUpperCase()]) {
    const hits = (await client.assistants.search({ name, limit: 100 })).filter((s) => s.metadata?.tag === tag);
    assert.equal(hits.length, 1, `name ${name}`);
  }
  assert.equal(await client.assistants.count({ metadata: { tag } }), 1);
  assert.equal(await client.assistants.count({ graphId: "memo", metadata: { tag } }), 1);
  const page = await client.assistants.search({ graphId: "memo", limit: 1, includePagination: true });
  assert.equal(page.assistants.length, 1);
  assert.equal(page.next, "1");
  const [newest] = await client.assistants.search({ graphId: "memo", limit: 1, sortBy: "created_at", sortOrder: "desc", select: ["assistant_id", "name"] });
  assert.deepEqual(Object.keys(newest).sort(), ["assistant_id", "name"]);
  await client.assistants.delete(mine.assistant_id);
});

test("an assistant's config and context reach its runs, under the run's own", async () => {
  const a = await client.assistants.create({
    graphId: "memo",
    config: { configurable: { user_id: "carol" } },
    context: { org: "globex" },
  });
  const thread = await client.threads.create();
  const out = await client.runs.wait(thread.thread_id, a.assistant_id, { input: "remember my tea" });
  assert.ok(out, "the run answered");
  assert.equal((await client.store.getItem(["notes", "carol", "globex"], "tea"))?.value?.text, "green");
  const run = (await client.runs.list(thread.thread_id))[0];
  assert.equal(run.assistant_id, a.assistant_id, "the run names the assistant, not its graph");
  const th = await client.threads.get(thread.thread_id);
  assert.equal(th.metadata.assistant_id, a.assistant_id);
  assert.equal(th.metadata.graph_id, "memo");

  const t2 = await client.threads.create();
  await client.runs.wait(t2.thread_id, a.assistant_id, {
    input: "remember my tea",
    config: { configurable: { user_id: "dave" } },
  });
  assert.equal((await client.store.getItem(["notes", "dave", "globex"], "tea"))?.value?.text, "green", "the run's configurable wins, the assistant's context stays");
  await client.assistants.delete(a.assistant_id);
  await assert.rejects(client.runs.wait(t2.thread_id, a.assistant_id, { input: "x" }), status(404, "No assistant found"));
});

test("delete with its threads", async () => {
  const a = await client.assistants.create({ graphId: "memo" });
  const named = await client.threads.create({ metadata: { assistant_id: a.assistant_id } });
  const other = await client.threads.create({ metadata: { assistant_id: "someone-else" } });
  await client.assistants.delete(a.assistant_id, { deleteThreads: true });
  await assert.rejects(client.assistants.get(a.assistant_id), status(404));
  await assert.rejects(client.threads.get(named.thread_id), status(404));
  assert.equal((await client.threads.get(other.thread_id)).thread_id, other.thread_id);
});

test("a run's metadata is on its checkpoints, and the history filters by it", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "memo", { input: "first", config: { configurable: { user_id: "eve" } } });
  const run = await client.runs.wait(thread.thread_id, "memo", {
    input: "second",
    metadata: { run_metadata: "second" },
    config: { configurable: { user_id: "eve" }, metadata: { from_config: "yes" } },
  });
  assert.ok(run);
  const all = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  const mine = await client.threads.getHistory(thread.thread_id, { limit: 100, metadata: { run_metadata: "second" } });
  assert.ok(mine.length > 0 && mine.length < all.length, `${mine.length} of ${all.length}`);
  const runs = await client.runs.list(thread.thread_id);
  const second = runs.find((r) => r.metadata?.run_metadata === "second");
  for (const h of mine) {
    assert.equal(h.metadata.run_id, second.run_id);
    assert.equal(h.metadata.from_config, "yes");
    assert.equal(h.metadata.assistant_id, "memo");
    assert.equal(h.metadata.graph_id, "memo");
  }
  const state = await client.threads.getState(thread.thread_id);
  assert.equal(state.metadata.run_metadata, "second", "the head state carries its run metadata: " + JSON.stringify(state.metadata));
  assert.ok(all.some((h) => h.metadata.run_id && h.metadata.run_id !== second.run_id && h.metadata.run_metadata === undefined));
});
