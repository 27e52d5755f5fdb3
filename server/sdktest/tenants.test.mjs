// Two tenants, one set of thread ids, through the official LangGraph JS
// SDK against a real `cairn serve --auth keys` (CAIRN_URL, CAIRN_KEY_A,
// CAIRN_KEY_B). Run by `go test ./cmd/cairn -run LangGraphSDK`, which
// starts the server and makes the keys.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.CAIRN_URL;
if (!apiUrl || !process.env.CAIRN_KEY_A || !process.env.CAIRN_KEY_B) {
  throw new Error("CAIRN_URL, CAIRN_KEY_A and CAIRN_KEY_B must be set (go test ./cmd/cairn -run LangGraphSDK sets them)");
}
const tenants = [
  { who: "a", client: new Client({ apiUrl, apiKey: process.env.CAIRN_KEY_A }) },
  { who: "b", client: new Client({ apiUrl, apiKey: process.env.CAIRN_KEY_B }) },
];

// status is the HTTP status of a rejected SDK call.
async function status(promise) {
  try {
    await promise;
  } catch (e) {
    return e.status ?? e.response?.status ?? String(e);
  }
  return 200;
}

test("each tenant has its own thread 'shared': create, get, update, search, runs, state, history, copy", async () => {
  for (const { who, client } of tenants) {
    const th = await client.threads.create({ threadId: "shared", metadata: { owner: who } });
    assert.equal(th.thread_id, "shared");
  }
  assert.equal(await status(tenants[0].client.threads.create({ threadId: "shared" })), 409);
  for (const { who, client } of tenants) {
    await client.threads.update("shared", { metadata: { seen: who } });
    const th = await client.threads.get("shared");
    assert.equal(th.metadata.owner, who);
    assert.equal(th.metadata.seen, who);
    const found = await client.threads.search({ metadata: { owner: who } });
    assert.deepEqual(found.map((t) => t.thread_id), ["shared"]);
    assert.equal((await client.threads.search({ metadata: { owner: who === "a" ? "b" : "a" } })).length, 0);

    const out = await client.runs.wait("shared", "approval", { input: `Where is my order? (${who})` });
    assert.ok(out, "a run's outcome");
    const state = await client.threads.getState("shared");
    assert.equal(state.checkpoint.thread_id, "shared");
    assert.deepEqual(state.next, ["send"]);
    const runs = await client.runs.list("shared");
    assert.equal(runs.length, 1);
    assert.equal(runs[0].thread_id, "shared");
    const history = await client.threads.getHistory("shared", { limit: 10 });
    assert.ok(history.every((h) => h.checkpoint.thread_id === "shared"));
    const copy = await client.threads.copy("shared");
    assert.notEqual(copy.thread_id, "shared");
    assert.equal((await client.threads.get(copy.thread_id)).metadata.owner, who);
  }
  // A run id of one tenant is not found on the other's thread of the same id.
  const [runA] = await tenants[0].client.runs.list("shared");
  assert.equal(await status(tenants[1].client.runs.get("shared", runA.run_id)), 404);
});

test("a run created with if_not_exists, streamed, on the same new id for both", async () => {
  for (const { who, client } of tenants) {
    const parts = [];
    for await (const p of client.runs.stream("made", "approval", {
      input: `hello from ${who}`, ifNotExists: "create", streamMode: ["values", "updates", "debug"],
    })) parts.push(p);
    assert.equal(parts[0].event, "metadata");
    assert.equal(parts[0].data.thread_id ?? "made", "made");
    const text = JSON.stringify(parts);
    assert.ok(!text.includes("tenant-"), "no answer names a tenant");
    assert.equal((await client.threads.get("made")).metadata.graph_id ?? "approval", "approval");
  }
});

test("deleting one tenant's thread leaves the other's", async () => {
  const [a, b] = tenants.map((t) => t.client);
  await a.threads.delete("shared");
  assert.equal(await status(a.threads.get("shared")), 404);
  assert.equal((await b.threads.get("shared")).metadata.owner, "b");
  const again = await a.threads.create({ threadId: "shared" });
  assert.equal(again.thread_id, "shared");
  assert.equal((await b.threads.get("shared")).metadata.owner, "b");
});
