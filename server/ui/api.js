// The HTTP API client: JSON requests with the API key from localStorage,
// a form asking for the key on a 401, and a reader of a run's SSE stream.
import {h, field} from './dom.js';

const KEY = 'cairn.apiKey';

// base is the server's root: the UI lives at <base>/ui/.
export const base = location.pathname.replace(/\/ui(\/.*)?$/, '');

export function getKey() {
  try {
    return localStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

export function setKey(k) {
  if (k) localStorage.setItem(KEY, k);
  else localStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, detail, path) {
    super(detail + (path ? ` (${path})` : ''));
    this.status = status;
    this.detail = detail;
    this.path = path;
  }
}

let asking = null;

// askKey shows the API key form once for all the requests waiting on it;
// it resolves true when a key was entered, false when dismissed.
export function askKey(message) {
  if (asking) return asking;
  asking = new Promise((resolve) => {
    const input = h('input', {type: 'password', name: 'apikey', autocomplete: 'off', id: 'apikey-input', value: getKey(), placeholder: 'cairn_…'});
    const dlg = h('dialog', {class: 'key-dialog', 'aria-labelledby': 'key-title', 'data-testid': 'key-dialog'});
    const done = (ok) => {
      dlg.close();
      dlg.remove();
      asking = null;
      resolve(ok);
    };
    const form = h('form', {method: 'dialog', onsubmit: (e) => {
      e.preventDefault();
      setKey(input.value.trim());
      done(!!input.value.trim());
    }},
      h('h2', {id: 'key-title'}, 'API key'),
      h('p', {class: 'muted'}, message || 'This server needs an API key.'),
      field('API key', input, {class: 'field'}),
      h('div', {class: 'row gap'},
        h('button', {type: 'submit', class: 'primary'}, 'Save key'),
        h('button', {type: 'button', onclick: () => done(false)}, 'Cancel')));
    dlg.append(form);
    dlg.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.append(dlg);
    dlg.showModal();
    input.focus();
  });
  return asking;
}

function headers(extra) {
  const hd = {...extra};
  const k = getKey();
  if (k) hd['x-api-key'] = k;
  return hd;
}

// request sends one request and returns the Response, asking for a key
// (and retrying) on a 401.
export async function request(method, path, body, extraHeaders, signal) {
  for (let attempt = 0; ; attempt++) {
    const hd = headers(extraHeaders);
    if (body !== undefined) hd['content-type'] = 'application/json';
    const res = await fetch(base + path, {method, headers: hd, body: body === undefined ? undefined : JSON.stringify(body), signal});
    if (res.status === 401 && attempt < 5) {
      const detail = await errorDetail(res);
      const ok = await askKey(getKey() ? `The key was refused: ${detail.detail}` : 'This server needs an API key.');
      if (ok) continue;
      throw new ApiError(401, detail.detail || 'an API key is needed');
    }
    if (!res.ok) {
      const d = await errorDetail(res);
      throw new ApiError(res.status, d.detail || `${res.status} ${res.statusText}`, d.path);
    }
    return res;
  }
}

async function errorDetail(res) {
  try {
    const d = await res.json();
    return {detail: typeof d.detail === 'string' ? d.detail : JSON.stringify(d.detail ?? d), path: d.path};
  } catch {
    return {detail: `${res.status} ${res.statusText}`};
  }
}

export async function api(method, path, body) {
  const res = await request(method, path, body);
  if (res.status === 204) return null;
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

// apiPaged is api for list endpoints that answer X-Pagination-Total.
export async function apiPaged(method, path, body) {
  const res = await request(method, path, body);
  const total = Number(res.headers.get('x-pagination-total'));
  return {items: await res.json(), total: Number.isFinite(total) && res.headers.has('x-pagination-total') ? total : null};
}

// streamRun follows a run's Server-Sent Events until the run ends,
// reconnecting with Last-Event-ID if the connection drops. onEvent gets
// {event, data, id}. It resolves when the stream ends.
export async function streamRun(threadId, runId, onEvent, signal) {
  let lastId = '';
  let failures = 0;
  for (;;) {
    const extra = {accept: 'text/event-stream'};
    if (lastId) extra['last-event-id'] = lastId;
    let res;
    try {
      res = await request('GET', `/threads/${threadId}/runs/${runId}/stream`, undefined, extra, signal);
    } catch (e) {
      if (signal?.aborted) return;
      if (e instanceof ApiError || ++failures > 5) throw e;
      await sleep(300 * failures);
      continue;
    }
    try {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buf += value.replace(/\r\n?/g, '\n');
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = parseFrame(frame);
          if (!ev) continue;
          if (ev.id) lastId = ev.id;
          failures = 0;
          onEvent(ev);
        }
      }
      return;
    } catch (e) {
      if (signal?.aborted) return;
      if (++failures > 5) throw e;
      await sleep(300 * failures);
    }
  }
}

function parseFrame(frame) {
  let event = 'message', id = '', data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const c = line.indexOf(':');
    const field = c < 0 ? line : line.slice(0, c);
    let val = c < 0 ? '' : line.slice(c + 1);
    if (val.startsWith(' ')) val = val.slice(1);
    if (field === 'event') event = val;
    else if (field === 'data') data.push(val);
    else if (field === 'id') id = val;
  }
  if (!data.length && event === 'message') return null;
  const raw = data.join('\n');
  let parsed = raw;
  try {
    parsed = raw ? JSON.parse(raw) : null;
  } catch {
    /* keep the text */
  }
  return {event, id, data: parsed};
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Cached assistants (they change only when the server restarts).
let assistants = null;
export async function getAssistants() {
  if (!assistants) {
    assistants = api('POST', '/assistants/search', {limit: 1000}).catch((e) => {
      assistants = null;
      throw e;
    });
  }
  return assistants;
}
