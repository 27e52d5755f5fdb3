// Crons as LangGraph has them, through the official LangGraph JS SDK's
// client.crons: made on a thread and stateless, searched and counted by
// thread, assistant and metadata, updated, deleted; a bad time zone
// refused naming the field. Run against a real `cairn serve` (CAIRN_URL)
// whose crons' clock runs a minute a second (CAIRN_TEST_CRON_CLOCK), so a
// cron of every minute runs within the test (go test ./cmd/cairn -run
// TestLangGraphSDKCrons).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.CAIRN_URL });

const status = (code, text) => (e) => e.status === code && (!text || String(e.message).includes(text));

test("crons on a thread and stateless", async () => {
  const thread = await client.threads.create();
  const onThread = await client.crons.createForThread(thread.thread_id, "five-steps", {
    schedule: "* * * * *",
    input: "x",
    metadata: { team: "a" },
  });
  assert.equal(onThread.thread_id, thread.thread_id);
  assert.equal(onThread.schedule, "* * * * *");
  assert.equal(onThread.enabled, true);
  assert.ok(Date.parse(onThread.next_run_date) > Date.parse(onThread.created_at));
  const stateless = await client.crons.create("five-steps", {
    schedule: "0 9 * * 1-5",
    timezone: "Europe/Paris",
    input: "y",
    onRunCompleted: "keep",
    endTime: "2099-01-01T00:00:00Z",
  });
  assert.equal(stateless.thread_id ?? null, null);
  assert.equal(stateless.on_run_completed, "keep");
  assert.equal(stateless.timezone, "Europe/Paris");
  assert.equal(new Date(stateless.next_run_date).getUTCMinutes(), 0);

  await assert.rejects(client.crons.create("five-steps", { schedule: "* * * * *", timezone: "Nowhere/Zone" }), status(422, "timezone"));
  await assert.rejects(client.crons.create("nope", { schedule: "* * * * *" }), status(404));
  await assert.rejects(client.crons.createForThread("no-such-thread", "five-steps", { schedule: "* * * * *" }), status(404));
  assert.equal(await client.crons.count(), 2, "refused crons are not stored");

  assert.deepEqual((await client.crons.search({ metadata: { team: "a" } })).map((c) => c.cron_id), [onThread.cron_id]);
  assert.deepEqual((await client.crons.search({ threadId: thread.thread_id })).map((c) => c.cron_id), [onThread.cron_id]);
  assert.equal(await client.crons.count({ assistantId: "five-steps" }), 2);
  assert.equal(await client.crons.count({ metadata: { team: "b" } }), 0);
  const sorted = await client.crons.search({ sortBy: "created_at", sortOrder: "asc", select: ["cron_id", "schedule"] });
  assert.deepEqual(sorted, [
    { cron_id: onThread.cron_id, schedule: "* * * * *" },
    { cron_id: stateless.cron_id, schedule: "0 9 * * 1-5" },
  ]);

  // The thread's cron runs (a minute is a second on this server's crons' clock).
  let runs = [];
  for (let i = 0; i < 100 && runs.length < 2; i++) {
    runs = (await client.runs.list(thread.thread_id, { limit: 100 })).filter((r) => r.metadata?.cron_id === onThread.cron_id);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(runs.length >= 2, `the cron made ${runs.length} runs`);
  assert.equal(new Set(runs.map((r) => r.metadata.cron_tick)).size, runs.length, "each tick once");

  const off = await client.crons.update(onThread.cron_id, { enabled: false, schedule: "*/5 * * * *", metadata: { more: 1 } });
  assert.equal(off.enabled, false);
  assert.equal(off.schedule, "*/5 * * * *");
  assert.deepEqual(off.metadata, { team: "a", more: 1 });
  assert.equal(await client.crons.count(), 2);
  assert.equal((await client.crons.search({ enabled: false })).length, 1);
  const cleared = await client.crons.update(stateless.cron_id, { endTime: null });
  assert.equal(cleared.end_time ?? null, null);

  await client.crons.delete(onThread.cron_id);
  await client.crons.delete(stateless.cron_id);
  assert.equal(await client.crons.count(), 0);
  await assert.rejects(client.crons.delete(onThread.cron_id), status(404));
});
