// Small DOM and formatting helpers shared by the views.

// h builds an element: h('button', {class: 'x', onclick: fn, 'data-seq': 3}, 'text', child, [more]).
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'value' && !svg) el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : '';
}

export function fmtTime(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  const now = new Date();
  const time = d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'});
  if (d.toDateString() === now.toDateString()) return time;
  return d.toLocaleDateString([], {year: 'numeric', month: 'short', day: 'numeric'}) + ' ' + time;
}

export function fmtAgo(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return fmtTime(iso);
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null) return '';
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function badge(status, extra) {
  const s = String(status || 'unknown').toLowerCase();
  return h('span', {class: `badge badge-${s.replace(/[^a-z_]/g, '')}`, 'data-testid': 'status', ...extra}, s);
}

export function json(v) {
  return JSON.stringify(v, null, 2);
}

export function isObj(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && equal(a[k], b[k]));
}

// field is a control with its visible label above it (the control needs an id).
export function field(text, control, {class: cls = 'field', hidden} = {}) {
  return h('div', {class: cls, hidden}, h('label', {for: control.id, class: 'label-text'}, text), control);
}

// toast shows a message for a few seconds (errors stay until closed).
export function toast(message, kind = 'error') {
  let box = document.getElementById('toasts');
  if (!box) document.body.append((box = h('div', {id: 'toasts', class: 'toasts'})));
  const close = () => el.remove();
  const el = h('div', {class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status', 'data-testid': `toast-${kind}`},
    h('span', {}, message), h('button', {type: 'button', class: 'ghost', 'aria-label': 'Dismiss', onclick: close}, '×'));
  box.append(el);
  setTimeout(close, kind === 'error' ? 12000 : 4000);
}

// threadsChanged tells the thread list to reload.
export function threadsChanged() {
  window.dispatchEvent(new CustomEvent('cairn:threads-changed'));
}
