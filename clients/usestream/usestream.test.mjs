// A chat page on the official useStream hook (app.jsx, bundled by
// build.mjs), served from its own origin — so every call to the server is
// cross-origin, as in a front end's documented set-up — against a real
// `cairn serve` (CAIRN_URL) serving a chat assistant declared in a file
// (CAIRN_ASSISTANT, default "chat"). Driven in Chromium (CAIRN_CHROMIUM).
// CAIRN_SCENARIO picks one scenario (send, stop, reload, approve); the Go
// test (go test ./cmd/cairn -run TestUseStream) starts a fresh server for
// each, since a scripted model answers its replies in order.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { servePage, launchOptions } from "../pagehost.mjs";

const API = (process.env.CAIRN_URL || "").replace(/\/$/, "");
if (!API) throw new Error("CAIRN_URL is required (go test ./cmd/cairn -run TestUseStream sets it)");
const ASSISTANT = process.env.CAIRN_ASSISTANT || "chat";
const SCENARIO = process.env.CAIRN_SCENARIO || "send";
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

async function open() {
  const page = await browser.newPage();
  const failures = [];
  page.on("requestfailed", (r) => {
    // A reload or a stop aborts the page's own requests (ERR_ABORTED); any
    // other failure — a refused preflight, a missing CORS header — counts.
    const why = r.failure()?.errorText ?? "";
    if (!why.includes("ERR_ABORTED")) failures.push(`${r.method()} ${r.url()}: ${why}`);
  });
  page.on("pageerror", (e) => failures.push(String(e)));
  await page.goto(`${origin}/?api=${encodeURIComponent(API)}&assistant=${encodeURIComponent(ASSISTANT)}`);
  return { page, failures };
}

async function send(page, text) {
  await page.fill("#input", text);
  await page.click("#send");
}

// aiText is the page's last AI message.
const aiText = (page) => page.evaluate(() => [...document.querySelectorAll("#messages li.ai")].map((li) => li.textContent).at(-1) ?? "");

// growth samples the last AI message until the page is idle: the distinct
// texts it showed, in order.
async function growth(page) {
  const seen = [];
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    // The status first: a text read after the page went idle is final (read
    // before, it may be one the stream finished meanwhile).
    const idle = (await page.textContent("#status")) === "idle";
    const t = await aiText(page);
    if (t && t !== seen.at(-1)) seen.push(t);
    if (idle && t) return seen;
    await page.waitForTimeout(5);
  }
  throw new Error(`the reply did not finish: ${JSON.stringify(seen)}`);
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

test(`useStream on cairn serve: ${SCENARIO}`, async () => {
  const { page, failures } = await open();
  if (SCENARIO === "send") {
    await send(page, "hello");
    const seen = await growth(page);
    // In pieces: the page showed a part of the reply before the whole (the
    // page is sampled, so a loaded machine may see fewer pieces than sent).
    assert.ok(seen.length >= 2 && seen.at(-1).startsWith(seen[0]) && seen[0].length < seen.at(-1).length, `the reply arrived in pieces: ${JSON.stringify(seen)}`);
    const { text } = await serverReply(page);
    assert.equal(seen.at(-1), text);
    assert.ok((await page.textContent("#messages")).includes("hello"));
  } else if (SCENARIO === "stop") {
    await send(page, "tell me a long story");
    await page.waitForFunction(() => document.querySelector("#messages li.ai")?.textContent.length > 0, null, { timeout: TIMEOUT });
    await page.click("#stop");
    await page.waitForFunction(() => document.querySelector("#status").textContent === "idle", null, { timeout: TIMEOUT });
    const { thread } = await serverReply(page);
    const runs = await api(`/threads/${thread}/runs`);
    assert.equal(runs[0].status, "interrupted", "the stopped run was cancelled");
    const shown = await aiText(page);
    await page.waitForTimeout(500);
    assert.equal(await aiText(page), shown, "nothing arrives after stop");
  } else if (SCENARIO === "reload") {
    await send(page, "tell me a long story");
    await page.waitForFunction(() => document.querySelector("#messages li.ai")?.textContent.length > 0, null, { timeout: TIMEOUT });
    const before = await aiText(page);
    await page.reload();
    const seen = await growth(page);
    const { text } = await serverReply(page);
    assert.equal(seen.at(-1), text, "after the reload the reply completes");
    assert.ok(text.length > before.length && text.startsWith(before.slice(0, 10)), `${before} then ${text}`);
  } else if (SCENARIO === "approve") {
    await send(page, "which files are there?");
    await page.waitForSelector("#interrupt", { timeout: TIMEOUT });
    // The value is the node's own: LangChain's review of the tool call
    // (HITLRequest), answered with its decisions as agent-chat-ui does.
    const review = JSON.parse(await page.textContent("#interrupt-value"));
    assert.equal(review.action_requests[0].name, "list_files", JSON.stringify(review));
    assert.deepEqual(review.review_configs[0].allowed_decisions, ["approve", "edit", "reject"]);
    await page.click("#approve");
    await page.waitForSelector("#interrupt", { state: "detached", timeout: TIMEOUT });
    const seen = await growth(page);
    const { text, state } = await serverReply(page);
    assert.equal(seen.at(-1), text);
    assert.deepEqual(state.next, []);
  } else {
    throw new Error(`CAIRN_SCENARIO ${SCENARIO}: want send, stop, reload or approve`);
  }
  assert.deepEqual(failures, [], "no request failed (CORS, preflights) and the page threw nothing");
});
