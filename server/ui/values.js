// Rendering state values: a field-by-field diff of two states (text word
// diffs, per-key diffs of objects, messages as a conversation) and a
// readable view of a whole state.
import {h, json, isObj, equal} from './dom.js';

export function isMessages(v) {
  return Array.isArray(v) && v.length > 0 && v.every((m) => isObj(m) && 'content' in m && ('role' in m || 'type' in m));
}

// diffRows lists the fields that differ between two states; a field whose
// value is an object (on one side at least, the other being an object or
// absent) is compared key by key: steps.draft.
export function diffRows(before, after) {
  before = isObj(before) ? before : {};
  after = isObj(after) ? after : {};
  const rows = [];
  for (const key of unionKeys(before, after)) {
    const b = before[key], a = after[key];
    if (equal(a, b)) continue;
    if (isMessages(a) || isMessages(b)) {
      rows.push({path: key, before: b, after: a, kind: 'messages'});
    } else if ((isObj(a) || a === undefined) && (isObj(b) || b === undefined) && !isMessages(a)) {
      const bo = b || {}, ao = a || {};
      for (const sub of unionKeys(bo, ao)) {
        if (!equal(ao[sub], bo[sub])) rows.push({path: `${key}.${sub}`, before: bo[sub], after: ao[sub]});
      }
    } else {
      rows.push({path: key, before: b, after: a});
    }
  }
  return rows;
}

function unionKeys(a, b) {
  const keys = Object.keys(a);
  for (const k of Object.keys(b)) if (!(k in a)) keys.push(k);
  return keys;
}

export function renderDiff(before, after, {parentLabel} = {}) {
  const rows = diffRows(before, after);
  if (!rows.length) {
    return h('p', {class: 'muted', 'data-testid': 'diff-empty'}, parentLabel ? `No field changed from ${parentLabel}.` : 'No fields.');
  }
  return h('div', {class: 'diff', 'data-testid': 'diff'}, rows.map(renderDiffRow));
}

function renderDiffRow(r) {
  const change = r.before === undefined ? 'added' : r.after === undefined ? 'removed' : 'changed';
  const head = h('div', {class: 'diff-head'}, h('code', {class: 'diff-path'}, r.path), h('span', {class: `tag tag-${change}`}, change));
  if (r.kind === 'messages') {
    return h('div', {class: `diff-row ${change}`, 'data-testid': 'diff-field', 'data-field': r.path}, head, renderMessagesDiff(r.before, r.after));
  }
  let beforeEl, afterEl;
  if (typeof r.before === 'string' && typeof r.after === 'string') {
    const parts = wordDiff(r.before, r.after);
    if (parts) {
      beforeEl = parts.before.map((p) => (p.t === 'del' ? h('del', {}, p.s) : p.s));
      afterEl = parts.after.map((p) => (p.t === 'ins' ? h('ins', {}, p.s) : p.s));
      if (r.before === '') beforeEl = valueText('');
      if (r.after === '') afterEl = valueText('');
    }
  }
  beforeEl ??= valueText(r.before);
  afterEl ??= valueText(r.after);
  return h('div', {class: `diff-row ${change}`, 'data-testid': 'diff-field', 'data-field': r.path}, head,
    h('div', {class: 'diff-sides'},
      h('div', {class: 'side before'}, h('div', {class: 'side-label'}, 'Before'), h('div', {class: 'side-body', 'data-testid': 'diff-before'}, beforeEl)),
      h('div', {class: 'side after'}, h('div', {class: 'side-label'}, 'After'), h('div', {class: 'side-body', 'data-testid': 'diff-after'}, afterEl))));
}

function valueText(v) {
  if (v === undefined) return h('span', {class: 'absent'}, '(absent)');
  if (typeof v === 'string') return v === '' ? h('span', {class: 'absent'}, '(empty)') : v;
  return h('pre', {class: 'json'}, json(v));
}

// wordDiff compares two texts word by word (the longest common
// subsequence of words and the spaces between them) and returns each
// side's parts: {before: [{t: 'same'|'del', s}], after: [{t: 'same'|'ins', s}]};
// null when the texts are too long to compare this way.
export function wordDiff(a, b) {
  const A = a.split(/(\s+)/), B = b.split(/(\s+)/);
  const n = A.length, m = B.length;
  if (n * m > 400000) return null;
  const w = m + 1;
  const L = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      L[i * w + j] = A[i] === B[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    }
  }
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (A[i] === B[j]) ops.push({t: 'same', s: A[i++], j: j++});
    else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) ops.push({t: 'del', s: A[i++]});
    else ops.push({t: 'ins', s: B[j++]});
  }
  while (i < n) ops.push({t: 'del', s: A[i++]});
  while (j < m) ops.push({t: 'ins', s: B[j++]});
  // texts with little in common read better as a whole before and after
  let same = 0;
  for (const p of ops) if (p.t === 'same' && /\S/.test(p.s)) same += p.s.length;
  if (same < 0.3 * Math.max(a.replace(/\s/g, '').length, b.replace(/\s/g, '').length)) {
    return {before: a ? [{t: 'del', s: a}] : [], after: b ? [{t: 'ins', s: b}] : []};
  }
  // a space kept between two changes belongs to the change on both sides
  const changed = (q) => q && q.t !== 'same';
  const before = [], after = [];
  const push = (side, t, s) => {
    if (!s) return;
    const last = side[side.length - 1];
    if (last && last.t === t) last.s += s;
    else side.push({t, s});
  };
  ops.forEach((p, k) => {
    if (p.t === 'same' && /^\s+$/.test(p.s) && changed(ops[k - 1]) && changed(ops[k + 1])) {
      push(before, 'del', p.s);
      push(after, 'ins', p.s);
    } else if (p.t === 'same') {
      push(before, 'same', p.s);
      push(after, 'same', p.s);
    } else if (p.t === 'del') push(before, 'del', p.s);
    else push(after, 'ins', p.s);
  });
  return {before, after};
}

function renderMessagesDiff(before, after) {
  const b = Array.isArray(before) ? before : [];
  const a = Array.isArray(after) ? after : [];
  let common = 0;
  while (common < a.length && common < b.length && equal(a[common], b[common])) common++;
  const wrap = h('div', {class: 'msgs-diff'});
  wrap.append(renderConversation(a, {newFrom: common}));
  if (common < b.length) {
    wrap.append(h('details', {class: 'old-msgs'}, h('summary', {}, `Before: ${b.length} messages (${b.length - common} replaced)`), renderConversation(b, {})));
  }
  return wrap;
}

export function renderConversation(msgs, {newFrom} = {}) {
  return h('div', {class: 'conversation', 'data-testid': 'conversation'}, (msgs || []).map((m, i) => {
    const role = String(m.role || m.type || 'message').toLowerCase();
    const isNew = newFrom !== undefined && i >= newFrom;
    return h('div', {class: `msg role-${role.replace(/[^a-z]/g, '')}${isNew ? ' msg-new' : ''}`, 'data-testid': 'message', 'data-role': role},
      h('div', {class: 'msg-role'}, role, isNew ? h('span', {class: 'tag tag-added'}, 'new') : null),
      h('div', {class: 'msg-content'}, messageText(m.content)));
  }));
}

function messageText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : p?.text ?? json(p))).join('\n');
  return json(c);
}

// renderValues shows a whole state: each field with its value in the
// most readable form.
export function renderValues(values) {
  if (!isObj(values) || !Object.keys(values).length) return h('p', {class: 'muted'}, 'Empty state.');
  return h('div', {class: 'values', 'data-testid': 'state-values'}, Object.entries(values).map(([k, v]) =>
    h('div', {class: 'value-field', 'data-field': k}, h('div', {class: 'value-key'}, h('code', {}, k)), h('div', {class: 'value-body'}, renderValue(v)))));
}

function renderValue(v) {
  if (typeof v === 'string') return h('div', {class: 'text'}, v);
  if (isMessages(v)) return renderConversation(v);
  if (isObj(v) && Object.values(v).every((x) => typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean')) {
    return h('dl', {class: 'kv'}, Object.entries(v).flatMap(([k, x]) => [h('dt', {}, k), h('dd', {}, String(x))]));
  }
  return h('pre', {class: 'json'}, json(v));
}

// fieldPaths lists the fields one can edit: every top-level key, and the
// keys of object fields (steps.draft).
export function fieldPaths(values) {
  const out = [];
  for (const [k, v] of Object.entries(isObj(values) ? values : {})) {
    out.push(k);
    if (isObj(v)) for (const sub of Object.keys(v)) out.push(`${k}.${sub}`);
  }
  return out;
}

export function getPath(values, path) {
  let v = values;
  for (const p of path.split('.')) {
    if (!isObj(v)) return undefined;
    v = v[p];
  }
  return v;
}

// nest turns a path and a value into the update that sets it:
// nest('steps.draft', 'x') = {steps: {draft: 'x'}}.
export function nest(path, value) {
  return path.split('.').reduceRight((acc, p) => ({[p]: acc}), value);
}
