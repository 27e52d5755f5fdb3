// Browser tests of the Cairn web UI (server/ui) against a running
// `cairn serve --assistants examples/serve`: CAIRN_URL names it (required),
// CAIRN_API_KEY is sent when the server wants keys, CAIRN_CHROMIUM is the
// browser, CAIRN_SCREENSHOTS a folder for screenshots. Data is seeded
// through the HTTP API; what the UI did is checked through it too.
import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {mkdirSync} from 'node:fs';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const BASE = (process.env.CAIRN_URL || '').replace(/\/$/, '');
if (!BASE) throw new Error('CAIRN_URL is required (the cairn serve to test, e.g. http://127.0.0.1:2024)');
const KEY = process.env.CAIRN_API_KEY || '';
const SHOTS = process.env.CAIRN_SCREENSHOTS || '';
const RUN = `ui-${Date.now().toString(36)}`; // tags this run's threads
const TIMEOUT = 15000;

let browser;

before(async () => {
  if (SHOTS) mkdirSync(SHOTS, {recursive: true});
  browser = await chromium.launch({
    executablePath: process.env.CAIRN_CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
});

after(async () => {
  await browser?.close();
});

// ---- the API, for seeding and checking ----

async function call(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (KEY) headers['x-api-key'] = KEY;
  const res = await fetch(BASE + path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function newThread(metadata) {
  return call('POST', '/threads', {metadata: {uitest: RUN, ...metadata}});
}

// runThread runs an assistant on a new thread to its end (or its pause).
async function runThread(assistant, input, metadata) {
  const t = await newThread(metadata);
  await call('POST', `/threads/${t.thread_id}/runs/wait`, {assistant_id: assistant, input});
  return t.thread_id;
}

async function history(tid) {
  return call('POST', `/threads/${tid}/history`, {limit: 1000});
}

// until polls fn until it returns a truthy value, and returns it.
async function until(fn, what, timeout = TIMEOUT) {
  const end = Date.now() + timeout;
  let last, err;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      err = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(last)}${err ? `; error: ${err.message}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ---- the browser ----

async function open(hash = '', {key = KEY} = {}) {
  const context = await browser.newContext({viewport: {width: 1400, height: 900}});
  if (key) await context.addInitScript((k) => localStorage.setItem('cairn.apiKey', k), key);
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.setDefaultTimeout(TIMEOUT);
  await page.goto(`${BASE}/ui/${hash}`);
  return page;
}

async function done(page, name) {
  if (SHOTS && name) await page.screenshot({path: join(SHOTS, `${name}.png`), fullPage: true});
  assert.deepEqual(page.errors, [], 'the page threw');
  await page.context().close();
}

// text waits until a locator's text matches.
async function text(locator, re, what) {
  return until(async () => {
    const t = await locator.innerText({timeout: 1000});
    return re.test(t) && t;
  }, `${what || locator}: ${re}`);
}

const checkpoint = (page, seq) => page.locator(`[data-testid="checkpoint"][data-seq="${seq}"]`);

// ---- tests ----

test('threads: newest first, search by metadata and status, open one', {timeout: 30000}, async () => {
  const older = await runThread('five-steps', 'an older thread', {case: 'list'});
  const newer = await runThread('approval', 'a newer thread', {case: 'list'});
  const page = await open();
  const items = page.getByTestId('thread-item');
  await page.locator(`[data-testid="thread-item"][data-thread-id="${newer}"]`).waitFor();
  let ids = await items.evaluateAll((els) => els.map((e) => e.dataset.threadId));
  assert.ok(ids.indexOf(newer) >= 0 && ids.indexOf(newer) < ids.indexOf(older), `newest first: ${ids}`);

  const search = page.getByRole('search', {name: 'Search threads'});
  await search.getByLabel('Metadata').fill(`uitest=${RUN}, case=list`);
  await search.getByRole('button', {name: 'Search'}).click();
  ids = await until(async () => {
    const got = await items.evaluateAll((els) => els.map((e) => e.dataset.threadId));
    return got.length === 2 && got;
  }, 'the metadata search to list two threads');
  assert.deepEqual(ids, [newer, older]);
  await text(page.getByTestId('thread-count'), /^1–2 of 2$/);

  await search.getByLabel('Status').selectOption('interrupted');
  await search.getByRole('button', {name: 'Search'}).click();
  await until(async () => (await items.count()) === 1, 'the status search to list one thread');
  const item = items.first();
  assert.equal(await item.getAttribute('data-thread-id'), newer);
  assert.equal(await item.getByTestId('status').innerText(), 'interrupted');

  await item.click();
  await page.waitForURL(`**/ui/#/threads/${newer}`);
  const view = page.getByTestId('thread-view');
  assert.equal(await view.getAttribute('data-thread-id'), newer);
  await text(page.getByTestId('thread-status'), /^interrupted$/);
  assert.equal(await item.getAttribute('aria-current'), 'page');
  await done(page, 'threads');
});

test('threads: pages of fifty', {timeout: 30000}, async () => {
  const ids = [];
  for (let i = 0; i < 52; i++) ids.push((await newThread({case: 'paging'})).thread_id);
  const page = await open();
  const search = page.getByRole('search', {name: 'Search threads'});
  await search.getByLabel('Metadata').fill(`uitest=${RUN} case=paging`);
  await search.getByRole('button', {name: 'Search'}).click();
  await text(page.getByTestId('thread-count'), /^1–50 of 52$/);
  assert.equal(await page.getByTestId('thread-item').count(), 50);
  assert.equal(await page.getByTestId('thread-item').first().getAttribute('data-thread-id'), ids[51], 'newest first');
  await page.getByRole('button', {name: 'Older ›'}).click();
  await text(page.getByTestId('thread-count'), /^51–52 of 52$/);
  const rest = await page.getByTestId('thread-item').evaluateAll((els) => els.map((e) => e.dataset.threadId));
  assert.deepEqual(rest, [ids[1], ids[0]]);
  assert.equal(await page.getByRole('button', {name: 'Older ›'}).isDisabled(), true);
  await page.getByRole('button', {name: '‹ Newer'}).click();
  await text(page.getByTestId('thread-count'), /^1–50 of 52$/);
  await done(page);
});

test('history: checkpoints with nodes, status and tokens; diff against the parent', {timeout: 30000}, async () => {
  const tid = await runThread('five-steps', 'notes on checkpoints', {case: 'history'});
  const page = await open(`#/threads/${tid}`);
  await checkpoint(page, 6).waitFor();
  assert.equal(await page.getByTestId('checkpoint').count(), 6);
  await text(page.getByTestId('history-summary'), /^6 checkpoints$/);

  const draft = checkpoint(page, 3);
  assert.equal(await draft.getByTestId('cp-nodes').innerText(), 'draft');
  assert.equal(await draft.getByTestId('cp-status').innerText(), 'success');
  assert.match(await draft.getByTestId('cp-tokens').innerText(), /^\d+→\d+ tok$/);
  assert.equal(await draft.getAttribute('data-parent-seq'), '2');
  // the head is selected at first
  assert.equal(await checkpoint(page, 6).getAttribute('aria-pressed'), 'true');

  await checkpoint(page, 2).click();
  await page.locator('[data-testid="checkpoint-detail"][data-seq="2"]').waitFor();
  await text(page.locator('[data-testid="diff-field"][data-field="steps.outline"] [data-testid="diff-after"]'), /What a checkpoint is/);

  await draft.click();
  await page.locator('[data-testid="checkpoint-detail"][data-seq="3"]').waitFor();
  assert.equal(await draft.getAttribute('aria-pressed'), 'true');
  assert.match(page.url(), new RegExp(`#/threads/${tid}/3$`));
  const field = page.locator('[data-testid="diff-field"][data-field="steps.draft"]');
  assert.equal(await page.getByTestId('diff-field').count(), 1, 'only steps.draft changed in the draft step');
  assert.equal(await field.getByTestId('diff-before').innerText(), '(absent)');
  assert.match(await field.getByTestId('diff-after').innerText(), /^A checkpoint records a step/);

  // the whole state at a checkpoint
  await page.getByTestId('state-details').locator('summary').click();
  await text(page.getByTestId('state-values'), /notes on checkpoints/);

  // a deep link selects the checkpoint
  await page.goto(`${BASE}/ui/#/threads/${tid}/4`);
  await page.locator('[data-testid="checkpoint-detail"][data-seq="4"]').waitFor();
  await text(page.locator('[data-testid="diff-field"][data-field="steps.critique"] [data-testid="diff-after"]'), /durable/);
  await done(page, 'history');
});

test('messages show as a conversation, new ones marked', {timeout: 30000}, async () => {
  const tid = await runThread('five-steps', 'a chat', {case: 'messages'});
  const hi = [{role: 'user', content: 'hi'}, {role: 'assistant', content: 'hello'}];
  await call('POST', `/threads/${tid}/state`, {values: {messages: hi}, as_node: 'summary'});
  await call('POST', `/threads/${tid}/state`, {values: {messages: [...hi, {role: 'user', content: 'What is a checkpoint?'}, {role: 'assistant', content: 'One committed step.'}]}, as_node: 'summary'});
  const page = await open(`#/threads/${tid}/8`);
  const field = page.locator('[data-testid="diff-field"][data-field="messages"]');
  await field.waitFor();
  const msgs = field.getByTestId('message');
  assert.equal(await msgs.count(), 4);
  assert.deepEqual(await msgs.evaluateAll((els) => els.map((e) => [e.dataset.role, e.classList.contains('msg-new')])),
    [['user', false], ['assistant', false], ['user', true], ['assistant', true]]);
  assert.match(await msgs.nth(3).innerText(), /One committed step\./);
  await done(page, 'messages');
});

test('fork from a checkpoint with an edited field, then resume', {timeout: 30000}, async () => {
  const tid = await runThread('five-steps', 'a note to fork', {case: 'fork'});
  const page = await open(`#/threads/${tid}/3`);
  await page.locator('[data-testid="checkpoint-detail"][data-seq="3"]').waitFor();
  const form = page.getByTestId('fork-form');
  await form.getByLabel('Field', {exact: true}).selectOption('steps.draft');
  assert.equal(await form.getByLabel('As node').inputValue(), 'draft');
  const value = form.getByLabel('New value');
  assert.match(await value.inputValue(), /^A checkpoint records a step/);
  await value.fill('A forked draft, written in the UI.');
  await form.getByRole('button', {name: 'Fork and resume'}).click();

  // the thread resumed from the fork: a new branch from #3 ran to the end
  const th = await until(async () => {
    const t = await call('GET', `/threads/${tid}`);
    return t.status === 'idle' && t.values.steps.summary && t.values.steps.draft === 'A forked draft, written in the UI.' && t;
  }, 'the resumed run to finish with the edited draft');
  assert.ok(th.values.final_output);
  // the stored checkpoints: not the input view the API shows before a run's first
  const h = (await history(tid)).filter((s) => s.metadata?.cairn?.input_of === undefined);
  const kids = h.filter((s) => s.parent_checkpoint?.checkpoint_id === '00000000-0000-8000-8000-000000000003');
  assert.equal(kids.length, 2, 'two checkpoints share #3 as parent');
  assert.equal(h.length, 10);

  // the tree shows the branch
  await until(async () => (await page.getByTestId('checkpoint').count()) === 10, 'the tree to show ten checkpoints');
  await text(page.getByTestId('history-summary'), /1 branch/);
  assert.equal(await page.locator('[data-testid="checkpoint"][data-parent-seq="3"]').count(), 2);
  const fork = checkpoint(page, 7);
  assert.equal(await fork.getAttribute('data-lane'), '1', 'the fork is drawn in a lane of its own');
  assert.equal(await checkpoint(page, 10).getAttribute('data-lane'), '1');
  assert.equal(await checkpoint(page, 4).getAttribute('data-lane'), '0');
  assert.equal(await page.locator('.tree-svg .branch-edge').count(), 1);

  await fork.click();
  await page.locator('[data-testid="checkpoint-detail"][data-seq="7"]').waitFor();
  const field = page.locator('[data-testid="diff-field"][data-field="steps.draft"]');
  await text(field.getByTestId('diff-before'), /A checkpoint records a step/);
  assert.equal(await field.getByTestId('diff-after').innerText(), 'A forked draft, written in the UI.');
  await done(page, 'fork');
});

test('pending approvals: approve, reject with a reason, edit', {timeout: 30000}, async () => {
  const [ok, no, edit] = await Promise.all(['Where is my order?', 'Cancel it all.', 'When does it ship?'].map((q) => runThread('approval', q, {case: 'approvals'})));
  const pending = await until(async () => {
    const ps = await call('GET', '/interrupts?status=pending&assistant_id=approval');
    return [ok, no, edit].every((t) => ps.some((p) => p.thread_id === t)) && ps;
  }, 'three pending interrupts');
  assert.ok(pending.every((p) => p.node === 'send'));

  const page = await open('#/approvals');
  const card = (tid) => page.locator(`[data-testid="approval"][data-thread-id="${tid}"]`);
  await card(ok).waitFor();
  await text(card(ok), /Dear customer, your order ships on Monday/);
  await card(ok).getByText('Interrupt payload').click();
  await text(card(ok).getByTestId('approval-payload'), /"send"/);
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'approvals-pending.png'), fullPage: true});

  await card(ok).getByRole('button', {name: 'Approve', exact: true}).click();
  await text(card(ok).getByTestId('approval-result'), /^Approved: run \w+/);

  await card(no).getByRole('button', {name: 'Reject…'}).click();
  await card(no).getByLabel('Reason').fill('Too curt for this customer.');
  await card(no).getByRole('button', {name: 'Confirm reject'}).click();
  await text(card(no).getByTestId('approval-result'), /^Rejected: run/);

  await card(edit).getByRole('button', {name: 'Edit…'}).click();
  await card(edit).getByLabel(/^Edits/).fill(JSON.stringify({steps: {draft: 'Edited before sending.'}}));
  await card(edit).getByRole('button', {name: 'Approve with edits'}).click();
  await text(card(edit).getByTestId('approval-result'), /^Approved with edits: run/);

  // who answered and how is in the checkpoint after the pause
  const finished = (tid) => until(async () => {
    const t = await call('GET', `/threads/${tid}`);
    if (t.status !== 'idle') return false;
    const answered = (await history(tid)).find((s) => s.metadata.cairn?.approval);
    return answered && {t, approval: answered.metadata.cairn.approval};
  }, `thread ${tid} to finish with its approval recorded`);
  const a = await finished(ok);
  assert.equal(a.approval.action, 'approve');
  assert.match(a.t.values.steps.send, /^Sent:/);
  assert.equal((await call('GET', `/threads/${ok}/runs`)).length, 2, 'the approval started a second run');

  const r = await finished(no);
  assert.equal(r.approval.action, 'reject');
  assert.equal(r.approval.reason, 'Too curt for this customer.');
  assert.equal(r.t.values.steps.send, undefined, 'a rejected step does not run');

  const e = await finished(edit);
  assert.equal(e.approval.action, 'edit');
  assert.equal(e.t.values.steps.draft, 'Edited before sending.');
  assert.ok(e.t.values.steps.send);

  // none of them is pending any more
  await page.getByRole('button', {name: 'Refresh'}).click();
  await until(async () => (await card(ok).count()) + (await card(no).count()) + (await card(edit).count()) === 0, 'the answered approvals to leave the list');
  await done(page, 'approvals-answered');
});

test("a chat's tool review: the calls and their arguments, approved with edits or rejected with a reason", {timeout: 30000}, async () => {
  const ask = (q) => runThread('chat', {messages: [{type: 'human', content: q}]}, {case: 'tool-review'});
  const [edit, no] = await Promise.all([ask('Which files are there?'), ask('review: respond')]);
  await until(async () => {
    const ps = await call('GET', '/interrupts?status=pending&assistant_id=chat');
    return [edit, no].every((t) => ps.some((p) => p.thread_id === t));
  }, 'two pending tool reviews');

  const page = await open('#/approvals');
  const card = (tid) => page.locator(`[data-testid="approval"][data-thread-id="${tid}"]`);
  await card(edit).waitFor();
  await text(card(edit).getByTestId('tool-call'), /^list_files$/);
  await text(card(edit), /Input: Which files are there\?/);
  await text(card(edit), /"dir": "\."/);
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'approvals-tool-review.png'), fullPage: true});

  // an edit that is not JSON is refused on the page, nothing sent
  await card(edit).getByRole('button', {name: 'Edit…'}).click();
  const args = card(edit).getByLabel('Arguments of list_files');
  await args.fill('{"dir": ');
  await card(edit).getByRole('button', {name: 'Approve with edits'}).click();
  await text(card(edit), /Arguments of list_files: not JSON/);
  await args.fill(JSON.stringify({dir: 'replies'}));
  await card(edit).getByRole('button', {name: 'Approve with edits'}).click();
  await text(card(edit).getByTestId('approval-result'), /^Approved with edits: run/);

  await card(no).getByRole('button', {name: 'Reject…'}).click();
  await card(no).getByLabel('Reason').fill('Not in this folder, please.');
  await card(no).getByRole('button', {name: 'Confirm reject'}).click();
  await text(card(no).getByTestId('approval-result'), /^Rejected: run/);

  const finished = (tid) => until(async () => {
    const t = await call('GET', `/threads/${tid}`);
    return t.status === 'idle' && t.values.messages.at(-1)?.type === 'ai' && t.values.messages;
  }, `thread ${tid} to answer`);
  const em = await finished(edit);
  const tool = em.findLast((m) => m.type === 'tool');
  assert.match(JSON.stringify(tool.content), /chat\.yaml/, 'the tool ran with the edited arguments (the replies folder)');
  assert.doesNotMatch(JSON.stringify(tool.content), /chat\.md/);
  assert.deepEqual(em.findLast((m) => m.type === 'ai' && m.tool_calls?.length).tool_calls[0].args, {dir: 'replies'}, 'the reply shows the edited call');

  const nm = await finished(no);
  const answered = nm.findLast((m) => m.type === 'tool');
  assert.equal(answered.content, 'Not in this folder, please.', "the reason is the tool's answer");
  assert.equal(answered.status, 'error');
  await done(page, 'approvals-tool-review');
});

test('a thread paused for approval shows it and resumes live when approved', {timeout: 30000}, async () => {
  const tid = await runThread('approval', 'Is it in stock?', {case: 'thread-approval'});
  const page = await open(`#/threads/${tid}`);
  const card = page.locator(`[data-testid="approval"][data-thread-id="${tid}"]`);
  await card.getByRole('button', {name: 'Approve', exact: true}).click();
  await text(page.getByTestId('live-status'), /^success$/);
  await text(page.getByTestId('thread-status'), /^idle$/);
  // the input, draft (paused before send: no checkpoint of its own), send
  await checkpoint(page, 3).waitFor();
  assert.equal(await checkpoint(page, 3).getByTestId('cp-nodes').innerText(), 'send');
  assert.equal((await call('GET', `/threads/${tid}`)).status, 'idle');
  await done(page, 'thread-approval');
});

test('live run: tokens and steps appear while slow-steps runs', {timeout: 30000}, async () => {
  const page = await open('#/new');
  await page.getByLabel('Assistant').selectOption('slow-steps');
  await page.getByLabel('Input', {exact: true}).fill('count for the live test');
  await page.getByLabel('Thread metadata').fill(`uitest=${RUN}, case=live`);
  await page.getByRole('button', {name: 'Start run'}).click();

  await page.waitForURL(/#\/threads\/[0-9a-f-]{36}$/);
  const tid = page.url().split('/').pop();
  const live = page.getByTestId('live-run');
  const one = live.locator('[data-testid="live-step"][data-node="one"]');
  await text(one.getByTestId('live-tokens'), /^one$/);
  // the first step's tokens showed while the run still had two steps to go
  const [run] = await call('GET', `/threads/${tid}/runs`);
  assert.ok(['running', 'pending'].includes(run.status), `run status while step one showed: ${run.status}`);
  assert.equal(await page.getByTestId('live-status').innerText(), 'running');
  const three = live.locator('[data-testid="live-step"][data-node="three"]');
  assert.notEqual(await three.getAttribute('data-state'), 'committed', 'step three is still ahead');
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'live-running.png'), fullPage: true});

  await until(async () => (await three.getAttribute('data-state', {timeout: 1000})) === 'committed', 'step three to commit');
  await text(three.getByTestId('live-tokens'), /^three$/);
  assert.equal(await one.getAttribute('data-state'), 'committed');
  await text(page.getByTestId('live-status'), /^success$/);
  // the tree grew with the run: input, one, two, three
  await until(async () => (await page.getByTestId('checkpoint').count()) === 4, 'four checkpoints');
  assert.equal(await checkpoint(page, 4).getByTestId('cp-nodes').innerText(), 'three');
  const t = await call('GET', `/threads/${tid}`);
  assert.equal(t.values.final_output, 'three');
  assert.equal(t.metadata.case, 'live');
  await done(page, 'live-done');
});

test('steer a running chat from its live view: the message is answered', {timeout: 30000}, async () => {
  const t = await newThread({case: 'steer'});
  const page = await open(`#/threads/${t.thread_id}`);
  await page.getByTestId('run-button').waitFor();
  await page.getByLabel('Assistant').selectOption('chat');
  await page.getByLabel('Run input').fill('take your time');
  await page.getByTestId('run-button').click();
  const box = page.getByTestId('steer-box');
  await box.waitFor();
  await page.getByTestId('steer-input').fill('also check the invoice date');
  await page.getByTestId('steer-button').click();
  await text(page.getByTestId('live-note'), /^Message #1 sent/);
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'steered.png'), fullPage: true});
  const [entry] = await call('GET', `/threads/${t.thread_id}/inbox`);
  assert.equal(entry.seq, 1);
  assert.equal(entry.message.content, 'also check the invoice date');
  // The model was answering when the message came: the thread's next
  // model call answers it, and the inbox says which checkpoint or run took it.
  const msgs = await until(async () => {
    const th = await call('GET', `/threads/${t.thread_id}`);
    const m = (th.values?.messages || []).map((x) => `${x.type}:${x.content}`);
    return th.status === 'idle' && m.some((x) => x.startsWith('ai:You said: also check the invoice date')) && m;
  }, 'the steer answered');
  assert.equal(msgs.filter((x) => x === 'human:also check the invoice date').length, 1, `taken once: ${msgs}`);
  const [after] = await call('GET', `/threads/${t.thread_id}/inbox`);
  assert.ok(['consumed', 'run'].includes(after.state), `inbox state ${after.state}`);
  await text(page.getByTestId('live-status'), /^success$/);
  assert.equal(await box.count(), 0, 'the steer box goes with the run');
  await done(page, 'steer-done');
});

test('cancel a running run', {timeout: 30000}, async () => {
  const t = await newThread({case: 'cancel'});
  const page = await open(`#/threads/${t.thread_id}`);
  await page.getByTestId('run-button').waitFor();
  await page.getByLabel('Assistant').selectOption('slow-steps');
  await page.getByLabel('Run input').fill('count, then stop');
  await page.getByTestId('run-button').click();
  const cancel = page.getByRole('button', {name: 'Cancel run'});
  await cancel.click();
  await text(page.getByTestId('live-status'), /^interrupted$/);
  await text(page.getByTestId('live-note'), /^Cancelled\.$/);
  const runs = await call('GET', `/threads/${t.thread_id}/runs`);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].status, 'interrupted');
  const th = await call('GET', `/threads/${t.thread_id}`);
  assert.equal(th.values.final_output, undefined, 'the cancelled run did not finish');
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'cancelled.png'), fullPage: true});
  // Retry: the same run goes on from its last checkpoint to its end.
  await page.getByTestId('retry-run').click();
  await text(page.getByTestId('live-status'), /^success$/);
  const after = await call('GET', `/threads/${t.thread_id}/runs`);
  assert.equal(after.length, 1, 'the retry is the same run');
  assert.equal(after[0].status, 'success');
  const h = await history(t.thread_id);
  const nodes = h.flatMap((c) => c.metadata?.cairn?.nodes || []);
  assert.equal(new Set(nodes).size, nodes.length, `a step committed twice: ${nodes}`);
  await done(page, 'retried');
});

test('queue: runs waiting and running, by assistant', {timeout: 60000}, async () => {
  // A slow-steps run lasts about 1.2 s and the page reads the queue every
  // 2 s: on a busy machine it can finish before the page has seen it, so a
  // run the page missed is followed by another, up to five.
  const page = await open('#/queue');
  const row = page.getByTestId('queue-assistants').locator('tr[data-key="slow-steps"]');
  let t, run, seen = false;
  for (let i = 0; i < 5 && !seen; i++) {
    t = await newThread({case: 'queue'});
    run = await call('POST', `/threads/${t.thread_id}/runs`, {assistant_id: 'slow-steps', input: 'count'});
    await page.reload(); // read the queue now, not at the next refresh
    seen = await until(async () => /slow-steps\s+0\s+1/.test(await row.innerText({timeout: 500})) && (await page.getByTestId('queue-totals').innerText()).includes('1 running'), 'slow-steps running', 4000).catch(() => false);
    if (!seen) await call('GET', `/threads/${t.thread_id}/runs/${run.run_id}/join`);
  }
  assert.ok(seen, 'the page never showed a slow-steps run running, in five runs');
  if (SHOTS) await page.screenshot({path: join(SHOTS, 'queue.png'), fullPage: true});
  await call('GET', `/threads/${t.thread_id}/runs/${run.run_id}/join`);
  await text(page.getByTestId('queue'), /No run is waiting or running|slow-steps\s+0\s+0/, 'the queue to empty');
  await done(page);
});

test('API key: a 401 asks for the key, which is kept and sent', {timeout: 30000}, async () => {
  // Against a server without keys, a stand-in check answers 401 to any API
  // request without this key; against one with keys, the real key is typed.
  const key = KEY || 'ui-test-key';
  const context = await browser.newContext({viewport: {width: 1400, height: 900}});
  const sent = [];
  if (!KEY) {
    await context.route((url) => !url.pathname.startsWith('/ui/'), async (route) => {
      const k = route.request().headers()['x-api-key'];
      sent.push(k || '');
      if (k !== key) return route.fulfill({status: 401, contentType: 'application/json', body: JSON.stringify({detail: 'server: missing or unknown API key'})});
      return route.continue();
    });
  } else {
    context.on('request', (r) => !new URL(r.url()).pathname.startsWith('/ui/') && sent.push(r.headers()['x-api-key'] || ''));
  }
  const p = await context.newPage();
  p.errors = [];
  p.on('pageerror', (e) => p.errors.push(e.message));
  p.setDefaultTimeout(TIMEOUT);
  await p.goto(`${BASE}/ui/`);
  const dialog = p.getByRole('dialog', {name: 'API key'});
  await dialog.waitFor();
  assert.equal(await p.getByTestId('thread-item').count(), 0);
  if (SHOTS) await p.screenshot({path: join(SHOTS, 'api-key.png')});
  await dialog.getByLabel('API key').fill(key);
  await dialog.getByRole('button', {name: 'Save key'}).click();
  await p.getByTestId('thread-item').first().waitFor();
  assert.equal(await p.evaluate(() => localStorage.getItem('cairn.apiKey')), key);
  assert.ok(sent.includes(''), 'a request went without a key first');
  assert.equal(sent[sent.length - 1], key, 'requests now carry the key');
  assert.equal(await dialog.count(), 0);
  await done(p);
});
