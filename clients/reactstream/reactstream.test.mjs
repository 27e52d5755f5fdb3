// A chat page on @langchain/react's useStream (app.jsx, bundled by
// build.mjs), served from its own origin — every call to the server is
// cross-origin, as in a front end's documented set-up — against a real
// `cairn serve` (CAIRN_URL) serving a chat assistant declared in a file
// (CAIRN_ASSISTANT, default "chat"). Driven in Chromium (CAIRN_CHROMIUM).
// CAIRN_SCENARIO picks one scenario (turns, approve, reload, websocket);
// the Go test (go test ./cmd/cairn -run TestReactStream) starts a fresh
// server for each.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { servePage, launchOptions } from "../pagehost.mjs";

const API = (process.env.CAIRN_URL || "").replace(/\/$/, "");
if (!API) throw new Error("CAIRN_URL is required (go test ./cmd/cairn -run TestReactStream sets it)");
const ASSISTANT = process.env.CAIRN_ASSISTANT || "chat";
const SCENARIO = process.env.CAIRN_SCENARIO || "turns";
const TIMEOUT = 20000;

let browser, site, origin;

before(async () => {
  site = await servePage(import.meta.dirname);
  origin = site.origin;
  browser = await chromium.launch(launchOptions);
});

after(async () => {
  await browser?.close();
  site?.close();
});

// open loads the page; requests records what the page asked of the server.
async function open(extra = "") {
  const page = await browser.newPage();
  const failures = [];
  const requests = [];
  page.on("websocket", (ws) => requests.push(`WS ${new URL(ws.url()).pathname}`));
  page.on("request", (r) => {
    if (r.url().startsWith(API)) requests.push(`${r.method()} ${new URL(r.url()).pathname}`);
  });
  page.on("requestfailed", (r) => {
    // A reload aborts the page's own requests (ERR_ABORTED); any other
    // failure — a refused preflight, a missing CORS header — counts.
    const why = r.failure()?.errorText ?? "";
    if (!why.includes("ERR_ABORTED")) failures.push(`${r.method()} ${r.url()}: ${why}`);
  });
  page.on("pageerror", (e) => failures.push(String(e)));
  await page.goto(`${origin}/?api=${encodeURIComponent(API)}&assistant=${encodeURIComponent(ASSISTANT)}${extra}`);
  return { page, failures, requests };
}

async function send(page, text) {
  await page.fill("#input", text);
  await page.click("#send");
}

// aiText is the page's last AI message.
const aiText = (page) => page.evaluate(() => [...document.querySelectorAll("#messages li.ai")].map((li) => li.textContent).at(-1) ?? "");
const aiCount = (page) => page.evaluate(() => document.querySelectorAll("#messages li.ai").length);

// growth samples the last AI message until the page is idle with n AI
// messages: the distinct texts it showed, in order.
async function growth(page, n = 1) {
  const seen = [];
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    // The status first: a text read after the page went idle is final.
    const idle = (await page.textContent("#status")) === "idle";
    const ours = (await aiCount(page)) >= n; // the reply of this turn is on the page
    const t = ours ? await aiText(page) : "";
    if (t && t !== seen.at(-1)) seen.push(t);
    if (idle && t) return seen;
    await page.waitForTimeout(5);
  }
  throw new Error(`the reply did not finish: ${JSON.stringify(seen)}; page: ${await page.textContent("main")}`);
}

async function api(path) {
  const res = await fetch(API + path);
  assert.equal(res.status, 200, path);
  return res.json();
}

// serverReply is the thread's last AI message as the server keeps it.
async function serverReply(page) {
  const thread = new URL(page.url()).searchParams.get("thread");
  assert.ok(thread, "the page keeps its thread in the URL");
  const st = await api(`/threads/${thread}/state`);
  const ai = st.values.messages.filter((m) => m.type === "ai");
  const c = ai.at(-1)?.content;
  return { thread, text: typeof c === "string" ? c : (c ?? []).map((x) => x.text ?? "").join(""), state: st };
}

// inPieces: the page showed a part of the reply before the whole (sampled,
// so a loaded machine may see fewer pieces than were sent).
function inPieces(seen) {
  assert.ok(seen.length >= 2 && seen.at(-1).startsWith(seen[0]) && seen[0].length < seen.at(-1).length, `the reply arrived in pieces: ${JSON.stringify(seen)}`);
}

// spoke checks the hook spoke the thread-centric protocol, over HTTP (sse)
// or a WebSocket, and not the run-centric one.
function spoke(requests, transport) {
  const commands = requests.some((r) => /^POST \/threads\/[^/]+\/commands$/.test(r));
  const socket = requests.some((r) => /^WS \/threads\/[^/]+\/stream\/events$/.test(r));
  assert.ok(transport === "websocket" ? socket && !commands : commands && !socket, `the hook spoke the thread-centric protocol over ${transport}: ${requests}`);
  assert.ok(!requests.some((r) => r.includes("/runs/stream")), `and not the run-centric one: ${requests}`);
}

async function turns(page, requests, transport) {
  await send(page, "hello");
  const seen = await growth(page, 1);
  inPieces(seen);
  const first = await serverReply(page);
  assert.equal(seen.at(-1), first.text);
  assert.ok((await page.textContent("#messages")).includes("hello"));
  spoke(requests, transport);
  // A second turn on the same thread.
  await send(page, "tell me a long story");
  const seen2 = await growth(page, 2);
  inPieces(seen2);
  const second = await serverReply(page);
  assert.equal(second.thread, first.thread, "the second turn is on the thread of the first");
  assert.equal(seen2.at(-1), second.text);
  assert.equal(second.state.values.messages.length, 4);
  assert.equal(await aiCount(page), 2);
}

test(`@langchain/react useStream on cairn serve: ${SCENARIO}`, async () => {
  const { page, failures, requests } = await open(SCENARIO === "websocket" ? "&transport=websocket" : "");
  if (SCENARIO === "turns") {
    await turns(page, requests, "sse");
  } else if (SCENARIO === "websocket") {
    await turns(page, requests, "websocket");
  } else if (SCENARIO === "reload") {
    await send(page, "tell me a long story");
    await page.waitForFunction(() => document.querySelector("#messages li.ai")?.textContent.length > 0, null, { timeout: TIMEOUT });
    const before = await aiText(page);
    await page.reload();
    // The hook shows the thread's state first, then its run going on.
    await page.waitForFunction(() => document.querySelector("#status")?.textContent === "loading", null, { timeout: TIMEOUT });
    const seen = await growth(page);
    const { text } = await serverReply(page);
    assert.equal(seen.at(-1), text, "after the reload the reply completes");
    assert.ok(text.length > before.length && text.startsWith(before.slice(0, 10)), `${before} then ${text}`);
    assert.ok(seen.length >= 2, `after the reload the reply went on streaming: ${JSON.stringify(seen)}`);
  } else if (SCENARIO === "approve") {
    await send(page, "which files are there?");
    await page.waitForSelector("#interrupt", { timeout: TIMEOUT });
    // The value is the node's own: LangChain's review of the tool call
    // (HITLRequest), answered with its decisions through respond().
    const review = JSON.parse(await page.textContent("#interrupt-value"));
    assert.equal(review.action_requests[0].name, "list_files", JSON.stringify(review));
    assert.deepEqual(review.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);
    await page.click("#approve");
    await page.waitForSelector("#interrupt", { state: "detached", timeout: TIMEOUT });
    const seen = await growth(page, 2);
    const { text, state } = await serverReply(page);
    assert.equal(seen.at(-1), text);
    assert.deepEqual(state.next, []);
    const runs = await api(`/threads/${state.checkpoint.thread_id}/runs`);
    assert.equal(runs[0].kwargs.command.resume.decisions[0].type, "approve", "respond() resumed the interrupt");
  } else {
    throw new Error(`CAIRN_SCENARIO ${SCENARIO}: want turns, approve, reload or websocket`);
  }
  assert.deepEqual(failures, [], "no request failed (CORS, preflights) and the page threw nothing");
});
