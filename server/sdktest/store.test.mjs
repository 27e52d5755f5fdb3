// The official LangGraph JS SDK's store client against a real `cairn
// serve` (CAIRN_URL) whose memory store indexes the "text" field with an
// embeddings endpoint (a fake one, in the Go test, that counts the words
// apple banana cherry dog cat car tea coffee). Run by
// `go test ./cmd/cairn -run LangGraphSDKStore`, which starts both.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const apiUrl = process.env.CAIRN_URL;
if (!apiUrl) throw new Error("CAIRN_URL is not set (go test ./cmd/cairn -run LangGraphSDKStore sets it)");
const client = new Client({ apiUrl, apiKey: process.env.CAIRN_API_KEY ?? null });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test("store: put, get, overwrite, delete", async () => {
  const ns = ["users", "u1", "prefs"];
  await client.store.putItem(ns, "ui", { theme: "dark", size: 12, nested: { tags: ["a", "b"] } });
  const item = await client.store.getItem(ns, "ui");
  assert.deepEqual(item.namespace, ns);
  assert.equal(item.key, "ui");
  assert.deepEqual(item.value, { theme: "dark", size: 12, nested: { tags: ["a", "b"] } });
  assert.match(item.createdAt, /^\d{4}-\d\d-\d\dT/);
  assert.equal(item.updatedAt, item.createdAt);
  assert.equal(await client.store.getItem(ns, "missing"), null);

  await sleep(5);
  await client.store.putItem(ns, "ui", { theme: "light" });
  const again = await client.store.getItem(ns, "ui");
  assert.deepEqual(again.value, { theme: "light" });
  assert.equal(again.createdAt, item.createdAt);
  assert.ok(again.updatedAt > item.updatedAt);

  await client.store.deleteItem(ns, "ui");
  assert.equal(await client.store.getItem(ns, "ui"), null);
  await client.store.deleteItem(ns, "ui"); // deleting a missing item is not an error
});

test("store: search with filters, pages and a semantic query", async () => {
  const ns = ["docs", "kb"];
  await client.store.putItem(ns, "a", { text: "apple apple banana", kind: "fruit", stars: 5 });
  await client.store.putItem(ns, "b", { text: "banana cherry", kind: "fruit", stars: 3 });
  await client.store.putItem(ns, "c", { text: "dog cat", kind: "pet", stars: 4, note: "apple" });
  await client.store.putItem(ns, "quiet", { text: "apple", kind: "fruit", stars: 1 }, { index: false });
  await client.store.putItem(["docs"], "top", { text: "car", kind: "vehicle", stars: 2 });

  const fruit = await client.store.searchItems(["docs"], { filter: { kind: "fruit" }, limit: 10 });
  assert.deepEqual(fruit.items.map((i) => i.key).sort(), ["a", "b", "quiet"]);
  assert.ok(fruit.items.every((i) => i.score === null || i.score === undefined));

  const good = await client.store.searchItems(["docs"], { filter: { stars: { $gte: 3, $lt: 5 } } });
  assert.deepEqual(good.items.map((i) => i.key).sort(), ["b", "c"]);
  const notFruit = await client.store.searchItems(["docs"], { filter: { kind: { $ne: "fruit" } } });
  assert.deepEqual(notFruit.items.map((i) => i.key).sort(), ["c", "top"]);

  // Ranked by the cosine similarity of "apple" to each item's text: a
  // (2 apples, 1 banana) first, then the others (0) by namespace and key;
  // "quiet" is not indexed; c's note is not an indexed field.
  const apple = await client.store.searchItems(["docs"], { query: "apple", limit: 10 });
  assert.deepEqual(apple.items.map((i) => i.key), ["a", "top", "b", "c"]);
  assert.ok(Math.abs(apple.items[0].score - 2 / Math.sqrt(5)) < 1e-6, `score ${apple.items[0].score}`);
  assert.equal(apple.items[1].score, 0);

  const pets = await client.store.searchItems(["docs"], { query: "cat and dog", filter: { kind: "pet" } });
  assert.deepEqual(pets.items.map((i) => [i.key, Math.round(i.score * 1000) / 1000]), [["c", 1]]);

  const page = await client.store.searchItems(["docs"], { query: "apple", limit: 2, offset: 1 });
  assert.deepEqual(page.items.map((i) => i.key), ["top", "b"]);
  const kbOnly = await client.store.searchItems(["docs", "kb"], { query: "car" });
  assert.ok(!kbOnly.items.some((i) => i.key === "top"));

  await assert.rejects(client.store.searchItems(["docs"], { filter: { stars: { $in: [1] } } }), /HTTP 422: .*\$in/);
});

test("store: listNamespaces with prefixes, suffixes, wildcards and depth", async () => {
  for (const ns of [["org", "a", "notes"], ["org", "b", "notes"], ["org", "b", "files"], ["other", "a", "notes"]]) {
    await client.store.putItem(ns, "k", { text: "x" });
  }
  let res = await client.store.listNamespaces({ prefix: ["org"] });
  assert.deepEqual(res.namespaces, [["org", "a", "notes"], ["org", "b", "files"], ["org", "b", "notes"]]);
  res = await client.store.listNamespaces({ prefix: ["*", "a"], suffix: ["notes"] });
  assert.deepEqual(res.namespaces, [["org", "a", "notes"], ["other", "a", "notes"]]);
  res = await client.store.listNamespaces({ prefix: ["org"], maxDepth: 2 });
  assert.deepEqual(res.namespaces, [["org", "a"], ["org", "b"]]);
  res = await client.store.listNamespaces({ prefix: ["org"], limit: 1, offset: 1 });
  assert.deepEqual(res.namespaces, [["org", "b", "files"]]);
});

test("store: an item expires its ttl after its last read or write", async () => {
  const ns = ["sessions"];
  await client.store.putItem(ns, "short", { text: "tea" }, { ttl: 0.005 }); // 0.3 s
  await client.store.putItem(ns, "long", { text: "coffee" }, { ttl: 0.03 }); // 1.8 s
  await sleep(900);
  assert.equal(await client.store.getItem(ns, "short"), null);
  assert.deepEqual((await client.store.getItem(ns, "long")).value, { text: "coffee" }); // refreshed: 1.8 s from now
  const found = await client.store.searchItems(ns, { query: "coffee tea" });
  assert.deepEqual(found.items.map((i) => i.key), ["long"]);
  await sleep(1200);
  assert.deepEqual((await client.store.getItem(ns, "long", { refreshTtl: false })).value, { text: "coffee" });
  await sleep(1500);
  assert.equal(await client.store.getItem(ns, "long"), null);
  assert.deepEqual((await client.store.listNamespaces({ prefix: ns })).namespaces, []);
});
