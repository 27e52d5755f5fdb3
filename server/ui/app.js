// The Cairn UI: a sidebar of threads (search, status, pages) and a main
// panel routed by the URL's hash: #/ and #/new (start a run),
// #/threads/ID[/SEQ] (a thread), #/approvals (pending approvals), #/queue
// (runs waiting and running, workers).
import {h, clear, badge, fmtAgo, shortId, field, toast} from './dom.js';
import {api, apiPaged, getAssistants, getKey, askKey} from './api.js';
import {ThreadView, startedRuns, STREAM_MODE} from './thread.js';
import {renderApprovals, refreshApprovalCount} from './approvals.js';
import {renderQueue} from './queue.js';

const PAGE = 50;
const main = document.getElementById('main');
const sidebar = document.getElementById('sidebar');
let view = null; // the ThreadView on screen, if any

window.addEventListener('unhandledrejection', (e) => toast(e.reason?.message || String(e.reason)));

// ---- thread list ----

const list = {offset: 0, total: null, status: '', metadata: ''};
const listEl = h('ul', {class: 'thread-list', 'data-testid': 'thread-list', 'aria-label': 'Threads'});
const pagerEl = h('div', {class: 'pager'});
const statusSel = h('select', {id: 'filter-status'},
  ['', 'idle', 'busy', 'interrupted', 'error'].map((s) => h('option', {value: s}, s || 'any')));
const metaInput = h('input', {id: 'filter-metadata', placeholder: 'key=value, key2=value2', autocomplete: 'off'});
const metaErr = h('span', {class: 'error-text small'});

// parseMetadata reads "a=1, b=two words" (or space-separated pairs).
export function parseMetadata(text) {
  const out = {};
  const s = text.trim();
  if (!s) return out;
  for (const part of s.split(/,|\s+(?=[^\s=,]+=)/)) {
    const p = part.trim();
    if (!p) continue;
    const i = p.indexOf('=');
    if (i <= 0) throw new Error(`"${p}": want key=value`);
    out[p.slice(0, i).trim()] = p.slice(i + 1).trim();
  }
  return out;
}

async function loadThreads() {
  let md;
  try {
    md = parseMetadata(list.metadata);
    metaErr.textContent = '';
  } catch (e) {
    metaErr.textContent = e.message;
    return;
  }
  const body = {limit: PAGE, offset: list.offset, sort_by: 'updated_at', sort_order: 'desc'};
  if (list.status) body.status = list.status;
  if (Object.keys(md).length) body.metadata = md;
  try {
    const {items, total} = await apiPaged('POST', '/threads/search', body);
    list.total = total;
    renderThreads(items);
  } catch (e) {
    clear(listEl, h('li', {class: 'error-text small'}, e.message));
  }
}

function renderThreads(items) {
  const current = view?.id;
  clear(listEl, items.length ? items.map((t) => {
    const md = t.metadata || {};
    const assistant = md.assistant_id || md.graph_id || '';
    const input = t.values?.input?.content ?? (typeof t.values?.input === 'string' ? t.values.input : '');
    return h('li', {}, h('a', {href: `#/threads/${t.thread_id}`, class: `thread-item${t.thread_id === current ? ' current' : ''}`, 'data-testid': 'thread-item',
      'data-thread-id': t.thread_id, 'data-status': t.status, 'aria-current': t.thread_id === current ? 'page' : null},
      h('span', {class: 'ti-top'}, h('span', {class: 'mono'}, shortId(t.thread_id)), assistant ? h('span', {class: 'ti-assistant'}, assistant) : null, badge(t.status)),
      typeof input === 'string' && input ? h('span', {class: 'ti-snippet'}, input) : null,
      h('span', {class: 'ti-sub'}, `updated ${fmtAgo(t.updated_at)}`)));
  }) : h('li', {class: 'muted small empty-list'}, list.metadata || list.status ? 'No thread matches.' : 'No threads yet.'));
  const from = items.length ? list.offset + 1 : 0, to = list.offset + items.length;
  const more = list.total !== null ? to < list.total : items.length === PAGE;
  clear(pagerEl,
    h('button', {type: 'button', disabled: list.offset === 0, onclick: () => { list.offset = Math.max(0, list.offset - PAGE); loadThreads(); }}, '‹ Newer'),
    h('span', {class: 'muted small', 'data-testid': 'thread-count'}, `${from}–${to}${list.total !== null ? ` of ${list.total}` : ''}`),
    h('button', {type: 'button', disabled: !more, onclick: () => { list.offset += PAGE; loadThreads(); }}, 'Older ›'));
}

function markCurrentThread() {
  for (const a of listEl.querySelectorAll('.thread-item')) {
    const on = a.dataset.threadId === view?.id;
    a.classList.toggle('current', on);
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

clear(sidebar,
  h('form', {class: 'filters', role: 'search', 'aria-label': 'Search threads', onsubmit: (e) => {
    e.preventDefault();
    list.status = statusSel.value;
    list.metadata = metaInput.value;
    list.offset = 0;
    loadThreads();
  }},
    field('Metadata', metaInput, {class: 'field'}),
    metaErr,
    h('div', {class: 'row gap'},
      field('Status', statusSel, {class: 'field inline'}),
      h('span', {class: 'grow'}),
      h('button', {type: 'submit'}, 'Search'))),
  listEl, pagerEl);

let listTimer = null;
window.addEventListener('cairn:threads-changed', () => {
  clearTimeout(listTimer);
  listTimer = setTimeout(() => {
    loadThreads();
    refreshApprovalCount();
  }, 100);
});

// ---- new run ----

async function renderNewRun(root) {
  const assistant = h('select', {id: 'new-assistant', required: true});
  const desc = h('p', {class: 'muted small', 'data-testid': 'assistant-description'});
  const input = h('textarea', {id: 'new-input', rows: 5, placeholder: 'What the run starts from'});
  const asJson = h('input', {type: 'checkbox', id: 'new-input-json'});
  const meta = h('input', {id: 'new-metadata', placeholder: 'key=value, key2=value2', autocomplete: 'off'});
  const status = h('p', {class: 'form-status', role: 'status'});
  const submit = h('button', {type: 'submit', class: 'primary'}, 'Start run');
  let assistants = [];
  const showDesc = () => {
    const a = assistants.find((x) => x.assistant_id === assistant.value);
    desc.textContent = a?.description || '';
  };
  assistant.addEventListener('change', showDesc);
  clear(root, h('div', {class: 'page narrow'},
    h('h1', {}, 'New run'),
    h('p', {class: 'muted'}, 'Creates a thread and runs an assistant on it; the thread opens with the run streaming live.'),
    h('form', {class: 'panel form', 'aria-label': 'New run', onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      status.textContent = 'Starting…';
      try {
        const metadata = parseMetadata(meta.value);
        let value = input.value;
        if (asJson.checked) value = JSON.parse(value);
        const thread = await api('POST', '/threads', {metadata});
        const body = {assistant_id: assistant.value, stream_mode: STREAM_MODE};
        if (asJson.checked || value !== '') body.input = value;
        const run = await api('POST', `/threads/${thread.thread_id}/runs`, body);
        startedRuns.set(thread.thread_id, run.run_id);
        location.hash = `#/threads/${thread.thread_id}`;
        loadThreads();
      } catch (err) {
        status.textContent = err.message;
        submit.disabled = false;
      }
    }},
      field('Assistant', assistant, {class: 'field'}),
      desc,
      field('Input', input, {class: 'field'}),
      h('label', {for: 'new-input-json', class: 'check'}, asJson, ' Input is JSON'),
      field('Thread metadata', meta, {class: 'field'}),
      h('div', {class: 'row gap'}, submit, status)),
    h('div', {class: 'assistants'}, h('h2', {}, 'Assistants'), h('ul', {class: 'assistant-list', 'data-testid': 'assistant-list'}))));
  try {
    assistants = await getAssistants();
    for (const a of assistants) assistant.append(h('option', {value: a.assistant_id}, a.name || a.assistant_id));
    showDesc();
    const ul = root.querySelector('.assistant-list');
    for (const a of assistants) {
      ul?.append(h('li', {}, h('strong', {}, a.name || a.assistant_id), a.metadata?.kind ? h('span', {class: 'tag tag-src'}, a.metadata.kind) : null,
        h('span', {class: 'muted small'}, a.description || '')));
    }
  } catch (e) {
    status.textContent = e.message;
  }
}

// ---- routing ----

function route() {
  const parts = (location.hash.replace(/^#\/?/, '') || '').split('/').filter(Boolean).map(decodeURIComponent);
  const page = parts[0] || 'new';
  for (const a of document.querySelectorAll('[data-nav]')) {
    const on = a.dataset.nav === page;
    a.classList.toggle('active', on);
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (page === 'threads' && parts[1]) {
    if (view && view.id === parts[1]) {
      if (parts[2] !== undefined) view.selectSeq(parts[2]);
      return;
    }
    view?.destroy();
    view = new ThreadView(main, parts[1], {seq: parts[2]});
    markCurrentThread();
    return;
  }
  view?.destroy();
  view = null;
  markCurrentThread();
  if (page === 'approvals') renderApprovals(main);
  else if (page === 'queue') renderQueue(main);
  else renderNewRun(main);
}

document.getElementById('key-button').addEventListener('click', async () => {
  await askKey(getKey() ? 'Change the API key kept in this browser (empty: forget it).' : 'Set the API key this browser sends with every request.');
  loadThreads();
  refreshApprovalCount();
});

window.addEventListener('hashchange', route);
route();
loadThreads();
refreshApprovalCount();
setInterval(() => {
  if (document.visibilityState === 'visible') {
    loadThreads();
    refreshApprovalCount();
  }
}, 10000);
