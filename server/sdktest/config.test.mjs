// A run's config.configurable and context, as the official LangGraph JS
// SDK sends them, reach the run: an agent file's memory namespace is
// filled from them ({configurable.user_id}, {context.org}), as a LangGraph
// app namespaces memories by the user its config names. Run against a real
// `cairn serve` (CAIRN_URL) serving the "memo" agent (go test ./cmd/cairn
// -run TestLangGraphSDKRunConfig writes it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

test("config.configurable and context reach the run", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "memo", {
    input: "remember my tea",
    config: { configurable: { user_id: "ada" }, tags: [], metadata: { from: "sdk" } },
    context: { org: "acme" },
  });
  const item = await client.store.getItem(["notes", "ada", "acme"], "tea");
  assert.equal(item?.value?.text, "green", JSON.stringify(item));
  const other = await client.store.getItem(["notes", "bob", "acme"], "tea");
  assert.equal(other, null);
});

test("a context that is not an object is refused, naming it", async () => {
  const thread = await client.threads.create();
  await assert.rejects(
    client.runs.wait(thread.thread_id, "memo", { input: "x", context: "acme" }),
    (e) => e.status === 422 && String(e.message).includes("$.context"),
  );
  const runs = await client.runs.list(thread.thread_id);
  assert.equal(runs.length, 0, "nothing was stored");
});

test("a graph's defaults (LANGGRAPH_CONFIG) go under each run's config and context", async () => {
  const memo = await client.assistants.get("memo");
  assert.deepEqual(memo.config, { configurable: { user_id: "default-user" } });
  assert.deepEqual(memo.context, { org: "default-org" });
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "memo", { input: "remember my tea" });
  assert.equal((await client.store.getItem(["notes", "default-user", "default-org"], "tea"))?.value?.text, "green");
  const t2 = await client.threads.create();
  await client.runs.wait(t2.thread_id, "memo", { input: "remember my tea", context: { org: "initech" } });
  assert.equal((await client.store.getItem(["notes", "default-user", "initech"], "tea"))?.value?.text, "green", "the run's context wins, the default configurable stays");
});
