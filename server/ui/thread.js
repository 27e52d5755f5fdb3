// The thread view: its history drawn as a tree, a checkpoint's state and
// diff, forking with an edited field, runs (live, streamed) and the
// thread's pending approval.
import {h, clear, badge, fmtTime, fmtMs, shortId, json, field, toast, threadsChanged} from './dom.js';
import {api, streamRun, getAssistants, ApiError} from './api.js';
import {renderDiff, renderValues, fieldPaths, getPath, nest} from './values.js';
import {approvalCard} from './approvals.js';
import {steerBox, steerNote} from './steer.js';

export const STREAM_MODE = ['values', 'updates', 'messages-tuple'];

// startedRuns: runs the UI just started, keyed by thread, for the thread
// view to follow as soon as it opens.
export const startedRuns = new Map();

const HISTORY_LIMIT = 1000; // checkpoints drawn
const ROW = 50; // a checkpoint row's height in the tree, px
const LANE = 18; // the distance between branches, px
const LANE_COLORS = ['#4b6bfb', '#d9480f', '#2b8a3e', '#ae3ec9', '#1098ad', '#e67700', '#c2255c'];

export function seqOf(state) {
  const c = state?.metadata?.cairn;
  if (c && Number.isFinite(c.seq)) return c.seq;
  const id = state?.checkpoint?.checkpoint_id || '';
  const n = parseInt(id.replace(/-/g, '').slice(-12), 16);
  return Number.isFinite(n) ? n : 0;
}

function durationOf(c) {
  const d = c?.duration_ms;
  if (!d) return null;
  return Object.values(d).reduce((a, b) => a + (Number(b) || 0), 0);
}

// inputView: a state of the history that is a run's input view, not a
// stored checkpoint.
export function inputView(state) {
  return state?.metadata?.cairn?.input_of !== undefined;
}

// layout places each checkpoint on a row (oldest first) and a lane: a
// checkpoint continues its parent's lane if it is the parent's first
// child, and starts a branch in a free lane otherwise.
export function layout(all) {
  // The input views the API shows before each run's input checkpoint
  // (LangGraph's input checkpoints) are not stored: the tree leaves them
  // out and links their children to their parents.
  const views = new Map(all.filter(inputView).map((s) => [s.checkpoint.checkpoint_id, s.parent_checkpoint?.checkpoint_id || null]));
  const states = all.filter((s) => !inputView(s));
  const nodes = states.map((s) => {
    const pid = s.parent_checkpoint?.checkpoint_id || null;
    return {s, id: s.checkpoint.checkpoint_id, pid: views.has(pid) ? views.get(pid) : pid, seq: seqOf(s), kids: []};
  });
  nodes.sort((a, b) => a.seq - b.seq || String(a.s.created_at).localeCompare(String(b.s.created_at)));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  nodes.forEach((n, i) => {
    n.row = i;
    n.parent = (n.pid && byId.get(n.pid)) || null;
    if (n.parent) n.parent.kids.push(n);
  });
  const laneEnd = [];
  let lanes = 1, branches = 0;
  for (const n of nodes) {
    if (n.parent && n.parent.kids[0] === n) {
      n.lane = n.parent.lane;
      continue;
    }
    let end = n;
    while (end.kids.length) end = end.kids[0];
    const start = n.parent ? n.parent.row : n.row;
    let lane = 0;
    while (laneEnd[lane] !== undefined && laneEnd[lane] >= start) lane++;
    laneEnd[lane] = Math.max(laneEnd[lane] ?? -1, end.row);
    n.lane = lane;
    lanes = Math.max(lanes, lane + 1);
    if (n.parent) branches++;
  }
  return {nodes, byId, lanes, branches};
}

const graphs = new Map();

// graphOrder lists an assistant's steps in the order its graph reaches
// them from __start__.
export async function graphOrder(assistantId) {
  if (!graphs.has(assistantId)) graphs.set(assistantId, api('GET', `/assistants/${encodeURIComponent(assistantId)}/graph`).catch((e) => {
    graphs.delete(assistantId);
    throw e;
  }));
  const g = await graphs.get(assistantId);
  const out = [], seen = new Set(['__start__', '__end__']);
  const queue = ['__start__'];
  while (queue.length) {
    const n = queue.shift();
    for (const e of g.edges || []) {
      if (e.source === n && !seen.has(e.target)) {
        seen.add(e.target);
        out.push(e.target);
        queue.push(e.target);
      }
    }
  }
  for (const n of g.nodes || []) if (!seen.has(n.id)) out.push(n.id);
  return out;
}

export class ThreadView {
  constructor(root, threadId, {seq} = {}) {
    this.root = root;
    this.id = threadId;
    this.wantSeq = seq === undefined || seq === '' ? null : Number(seq);
    this.selected = null; // checkpoint id
    this.detailFor = null;
    this.live = null;
    this.closed = false;
    this.build();
    this.refresh().then(() => {
      const run = startedRuns.get(this.id);
      if (run) {
        startedRuns.delete(this.id);
        this.follow(run);
      } else if (this.thread?.status === 'busy') {
        this.followActive();
      }
      this.watch();
    }, (e) => this.fail(e));
  }

  // watch notices changes made elsewhere (a run started by another
  // client, an approval answered on another page).
  watch() {
    this.watchTimer = setInterval(async () => {
      if (this.closed || document.visibilityState !== 'visible' || (this.live && !this.live.done)) return;
      try {
        const t = await api('GET', `/threads/${this.id}`);
        if (this.closed || t.updated_at === this.thread?.updated_at) return;
        await this.refresh();
        if (t.status === 'busy') this.followActive();
      } catch {
        /* the next tick tries again */
      }
    }, 4000);
  }

  destroy() {
    this.closed = true;
    this.live?.ctrl.abort();
    clearTimeout(this.refreshTimer);
    clearInterval(this.watchTimer);
  }

  fail(e) {
    if (e instanceof ApiError && e.status === 404) {
      clear(this.root, h('div', {class: 'empty'}, h('h1', {}, 'Thread not found'), h('p', {class: 'muted'}, e.detail), h('p', {}, h('a', {href: '#/'}, 'Back to threads'))));
      return;
    }
    toast(e.message || String(e));
  }

  build() {
    this.headEl = h('header', {class: 'thread-head'});
    this.pendingEl = h('div', {class: 'pending-slot'});
    this.runBarEl = h('div', {class: 'run-bar-slot'});
    this.liveEl = h('div', {class: 'live-slot'});
    this.treeEl = h('div', {class: 'tree', 'data-testid': 'history-tree'});
    this.historyHead = h('div', {class: 'section-head'}, h('h2', {}, 'History'));
    this.detailEl = h('section', {class: 'detail panel', 'aria-label': 'Checkpoint'});
    clear(this.root, h('div', {class: 'thread-view', 'data-testid': 'thread-view', 'data-thread-id': this.id},
      this.headEl, this.pendingEl, this.runBarEl, this.liveEl,
      h('div', {class: 'thread-body'},
        h('section', {class: 'history panel', 'aria-label': 'History'}, this.historyHead, this.treeEl),
        this.detailEl)));
    this.detailEl.append(h('p', {class: 'muted'}, 'Loading…'));
  }

  assistantId() {
    const md = this.thread?.metadata || {};
    return md.assistant_id || md.graph_id || '';
  }

  async refresh() {
    const [thread, history] = await Promise.all([
      api('GET', `/threads/${this.id}`),
      api('POST', `/threads/${this.id}/history`, {limit: HISTORY_LIMIT}),
    ]);
    if (this.closed) return;
    this.thread = thread;
    this.history = history || [];
    this.tree = layout(this.history);
    this.renderHead();
    this.renderTree();
    if (!this.runBarEl.firstChild) this.renderRunBar();
    await this.renderPending();
    const nodes = this.tree.nodes;
    // the selection follows the head until a checkpoint is picked
    let sel = this.pinned && this.selected && this.tree.byId.get(this.selected);
    if (!sel && this.wantSeq !== null) {
      sel = nodes.find((n) => n.seq === this.wantSeq);
      this.pinned = !!sel;
    }
    if (!sel) sel = nodes[nodes.length - 1];
    this.wantSeq = null;
    if (sel) this.select(sel.id, {scroll: !this.selected || !this.pinned});
    else clear(this.detailEl, h('p', {class: 'muted'}, 'No checkpoints yet: start a run.'));
  }

  // refreshSoon batches the refreshes a live run asks for.
  refreshSoon() {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refresh().catch((e) => this.fail(e)), 120);
  }

  selectSeq(seq) {
    const n = this.tree?.nodes.find((x) => x.seq === Number(seq));
    if (n) {
      this.pinned = true;
      this.select(n.id);
    }
    else this.wantSeq = Number(seq);
  }

  renderHead() {
    const t = this.thread;
    const md = t.metadata || {};
    const chips = Object.entries(md).filter(([k]) => k !== 'file').map(([k, v]) =>
      h('span', {class: 'chip', title: `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`}, h('span', {class: 'chip-k'}, k), typeof v === 'string' ? v : JSON.stringify(v)));
    clear(this.headEl,
      h('div', {class: 'title-row'},
        h('h1', {}, 'Thread ', h('span', {class: 'mono', title: t.thread_id}, t.thread_id)),
        badge(t.status, {'data-testid': 'thread-status'})),
      h('div', {class: 'chips'}, chips,
        h('span', {class: 'muted small'}, `created ${fmtTime(t.created_at)} · updated ${fmtTime(t.updated_at)}`)));
  }

  async renderRunBar() {
    const input = h('textarea', {id: 'run-input', rows: 2, placeholder: 'Input text (empty: continue from the head checkpoint)'});
    const sel = h('select', {id: 'run-assistant'});
    const button = h('button', {type: 'submit', class: 'primary', 'data-testid': 'run-button'}, 'Run');
    const form = h('form', {class: 'run-bar panel', 'aria-label': 'Run this thread', onsubmit: async (e) => {
      e.preventDefault();
      button.disabled = true;
      try {
        const body = {assistant_id: sel.value, stream_mode: STREAM_MODE};
        if (input.value.trim()) body.input = input.value;
        const run = await api('POST', `/threads/${this.id}/runs`, body);
        input.value = '';
        this.follow(run.run_id);
        threadsChanged();
      } catch (err) {
        toast(err.message);
      } finally {
        button.disabled = false;
      }
    }},
      field('Run input', input, {class: 'field grow'}),
      field('Assistant', sel, {class: 'field'}),
      button);
    clear(this.runBarEl, form);
    try {
      const list = await getAssistants();
      const mine = this.assistantId();
      for (const a of list) sel.append(h('option', {value: a.assistant_id, selected: a.assistant_id === mine || a.graph_id === mine}, a.name || a.assistant_id));
    } catch (e) {
      toast(e.message);
    }
  }

  async renderPending() {
    if (this.thread.status !== 'interrupted') {
      clear(this.pendingEl);
      this.pendingId = null;
      return;
    }
    let pending = [];
    try {
      pending = await api('GET', `/threads/${this.id}/interrupts`);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) toast(e.message);
    }
    const p = pending?.[0];
    if (!p) {
      clear(this.pendingEl);
      return;
    }
    if (this.pendingId === p.interrupt_id) return; // keep a half-filled form
    this.pendingId = p.interrupt_id;
    clear(this.pendingEl, approvalCard(p, {thread: this.thread, compact: true, onAnswered: (run) => {
      this.pendingId = null;
      if (run?.run_id) this.follow(run.run_id);
      else this.refreshSoon();
    }}));
  }

  renderTree() {
    const {nodes, lanes, branches} = this.tree;
    const headSeq = nodes.length ? nodes[nodes.length - 1].seq : null;
    clear(this.historyHead, h('h2', {}, 'History'),
      h('span', {class: 'muted small', 'data-testid': 'history-summary'},
        `${nodes.length} checkpoint${nodes.length === 1 ? '' : 's'}` + (branches ? ` · ${branches} branch${branches === 1 ? '' : 'es'}` : '') +
        ((this.history?.length || 0) >= HISTORY_LIMIT ? ` (the newest ${nodes.length})` : '')));
    if (!nodes.length) {
      clear(this.treeEl, h('p', {class: 'muted'}, 'No checkpoints yet.'));
      return;
    }
    const width = lanes * LANE + 10;
    const x = (l) => 10 + l * LANE;
    const y = (r) => r * ROW + ROW / 2;
    const svg = h('svg:svg', {class: 'tree-svg', width, height: nodes.length * ROW, 'aria-hidden': 'true'});
    for (const n of nodes) {
      if (!n.parent) continue;
      const px = x(n.parent.lane), py = y(n.parent.row), cx = x(n.lane), cy = y(n.row);
      const color = LANE_COLORS[n.lane % LANE_COLORS.length];
      const d = px === cx ? `M${px} ${py} L${cx} ${cy}` : `M${px} ${py} C${px} ${py + ROW * 0.45} ${cx} ${py + ROW * 0.2} ${cx} ${py + ROW * 0.7} L${cx} ${cy}`;
      svg.append(h('svg:path', {d, stroke: color, 'stroke-width': 2, fill: 'none', class: n.lane !== n.parent.lane ? 'edge branch-edge' : 'edge'}));
    }
    for (const n of nodes) {
      const st = n.s.metadata?.cairn?.status || '';
      svg.append(h('svg:circle', {cx: x(n.lane), cy: y(n.row), r: n.seq === headSeq ? 6.5 : 5, class: `dot dot-${st.toLowerCase()}${n.seq === headSeq ? ' dot-head' : ''}`,
        stroke: LANE_COLORS[n.lane % LANE_COLORS.length], 'data-seq': n.seq}));
    }
    const list = h('ol', {class: 'cp-list', style: `margin-left:${width + 4}px`});
    for (const n of nodes) list.append(h('li', {}, this.renderRow(n, headSeq)));
    this.rowEls = new Map([...list.querySelectorAll('[data-testid="checkpoint"]')].map((el) => [el.dataset.checkpointId, el]));
    clear(this.treeEl, h('div', {class: 'tree-inner', style: `height:${nodes.length * ROW}px`}, svg, list));
    if (this.selected) this.markSelected();
  }

  renderRow(n, headSeq) {
    const s = n.s;
    const c = s.metadata?.cairn || {};
    const src = c.source || s.metadata?.source;
    const nodesRan = (c.nodes || []).filter(Boolean);
    let what = nodesRan.join(', ');
    if (!what) {
      if (c.status === 'INTERRUPTED') what = `paused before ${(s.next || []).join(', ') || 'a step'}`;
      else if (c.approval) what = `${c.approval.action}`;
      else what = src || 'checkpoint';
    }
    const dur = durationOf(c);
    const tok = c.tokens;
    const line2 = [];
    if (c.status) line2.push(h('span', {class: `cp-status st-${c.status.toLowerCase()}`, 'data-testid': 'cp-status'}, c.status.toLowerCase()));
    if (dur !== null) line2.push(h('span', {'data-testid': 'cp-duration'}, fmtMs(dur)));
    if (tok && (tok.input || tok.output)) line2.push(h('span', {'data-testid': 'cp-tokens', title: 'tokens in → out'}, `${tok.input || 0}→${tok.output || 0} tok`));
    line2.push(h('span', {}, fmtTime(s.created_at)));
    return h('button', {
      type: 'button', class: 'cp-row', 'data-testid': 'checkpoint', 'data-seq': n.seq, 'data-parent-seq': n.parent ? n.parent.seq : '',
      'data-lane': n.lane, 'data-checkpoint-id': n.id, 'aria-pressed': 'false', 'aria-label': `Checkpoint ${n.seq}: ${what}`,
      onclick: () => {
        this.pinned = true;
        this.select(n.id, {push: true});
      },
    },
      h('span', {class: 'cp-line1'},
        h('span', {class: 'cp-seq'}, `#${n.seq}`),
        h('span', {class: 'cp-nodes', 'data-testid': 'cp-nodes'}, what),
        src && src !== 'loop' ? h('span', {class: `tag tag-src`}, src) : null,
        c.forked_from || (n.parent && n.lane !== n.parent.lane) ? h('span', {class: 'tag tag-fork'}, 'fork') : null,
        c.approval ? h('span', {class: `tag tag-${c.approval.action}`}, c.approval.action) : null,
        n.seq === headSeq ? h('span', {class: 'tag tag-head'}, 'head') : null),
      h('span', {class: 'cp-line2'}, line2.flatMap((x, i) => (i ? [' · ', x] : [x]))));
  }

  // scrollTree brings a row into the tree's view (not the page's).
  scrollTree(el) {
    if (!el) return;
    const box = this.treeEl, y = el.offsetTop, hgt = el.offsetHeight;
    if (y < box.scrollTop) box.scrollTop = y;
    else if (y + hgt > box.scrollTop + box.clientHeight) box.scrollTop = y + hgt - box.clientHeight;
  }

  markSelected() {
    for (const [id, el] of this.rowEls || []) {
      el.setAttribute('aria-pressed', String(id === this.selected));
      el.classList.toggle('selected', id === this.selected);
    }
  }

  select(id, {push, scroll} = {}) {
    const n = this.tree.byId.get(id);
    if (!n) return;
    this.selected = id;
    this.markSelected();
    if (push) {
      const want = `#/threads/${this.id}/${n.seq}`;
      if (location.hash !== want) history.replaceState(null, '', want);
    }
    if (scroll) this.scrollTree(this.rowEls.get(id));
    if (this.detailFor !== id) {
      this.detailFor = id;
      this.renderDetail(n);
    }
  }

  renderDetail(n) {
    const s = n.s;
    const c = s.metadata?.cairn || {};
    const md = s.metadata || {};
    const facts = [];
    const fact = (k, v) => v !== undefined && v !== null && v !== '' && facts.push(h('dt', {}, k), h('dd', {}, v));
    fact('Checkpoint', h('span', {class: 'mono'}, s.checkpoint.checkpoint_id));
    fact('Parent', n.parent ? h('a', {href: `#/threads/${this.id}/${n.parent.seq}`, onclick: (e) => { e.preventDefault(); this.pinned = true; this.select(n.parent.id, {push: true, scroll: true}); }}, `#${n.parent.seq}`) : 'none');
    fact('Created', fmtTime(s.created_at));
    fact('Source', c.source || md.source);
    fact('Step', md.step);
    fact('Nodes', (c.nodes || []).join(', '));
    fact('Next', (s.next || []).join(', ') || 'end');
    const dur = durationOf(c);
    if (dur !== null) fact('Duration', `${fmtMs(dur)}` + (Object.keys(c.duration_ms).length > 1 ? ` (${Object.entries(c.duration_ms).map(([k, v]) => `${k} ${fmtMs(v)}`).join(', ')})` : ''));
    if (c.tokens) fact('Tokens', `${c.tokens.input || 0} in, ${c.tokens.output || 0} out`);
    if (md.run_id) fact('Run', h('span', {class: 'mono'}, md.run_id));
    if (c.stop_reason) fact('Stop reason', c.stop_reason);
    if (c.forked_from) fact('Forked from', `#${c.forked_from.seq}` + (c.forked_from.thread && c.forked_from.thread !== this.id ? ` of ${shortId(c.forked_from.thread)}` : ''));
    if (c.approval) fact('Approval', `${c.approval.action} by ${c.approval.by || '?'} at ${fmtTime(c.approval.at)}${c.approval.reason ? ` — “${c.approval.reason}”` : ''}`);
    const errors = [c.error, ...(s.tasks || []).map((t) => t.error)].filter(Boolean);
    const parentValues = n.parent ? n.parent.s.values : {};
    clear(this.detailEl,
      h('div', {class: 'detail-head', 'data-testid': 'checkpoint-detail', 'data-seq': n.seq},
        h('h2', {}, `Checkpoint #${n.seq}`),
        c.status ? badge(c.status) : null),
      errors.length ? h('div', {class: 'error-box', role: 'alert'}, errors.map((e) => h('pre', {}, typeof e === 'string' ? e : json(e)))) : null,
      h('dl', {class: 'facts'}, facts),
      h('h3', {}, n.parent ? `Changes from #${n.parent.seq}` : 'Initial state'),
      n.parent ? renderDiff(parentValues, s.values, {parentLabel: `#${n.parent.seq}`}) : renderValues(s.values),
      n.parent ? h('details', {class: 'block', 'data-testid': 'state-details'}, h('summary', {}, 'State at this checkpoint'), renderValues(s.values)) : null,
      h('details', {class: 'block'}, h('summary', {}, 'Metadata'), h('pre', {class: 'json'}, json(s.metadata))),
      this.forkForm(n));
  }

  forkForm(n) {
    const s = n.s;
    const c = s.metadata?.cairn || {};
    const paths = fieldPaths(s.values);
    const changed = new Set();
    for (const p of paths) if (JSON.stringify(getPath(s.values, p)) !== JSON.stringify(getPath(n.parent?.s.values || {}, p))) changed.add(p);
    // default: the most specific field this checkpoint changed
    const first = [...changed].reverse().find((p) => p.includes('.')) || [...changed][0] || paths.find((p) => p.includes('.')) || paths[0] || '';
    const OTHER = '__other__';
    const fieldSel = h('select', {id: 'fork-field'}, paths.map((p) => h('option', {value: p, selected: p === first}, p)), h('option', {value: OTHER}, 'Other field…'));
    const otherPath = h('input', {id: 'fork-path', placeholder: 'e.g. steps.draft', autocomplete: 'off'});
    const otherWrap = field('Field path', otherPath, {class: 'field', hidden: true});
    const value = h('textarea', {id: 'fork-value', rows: 6, spellcheck: 'false'});
    const isJson = h('input', {type: 'checkbox', id: 'fork-json'});
    const nodes = (c.nodes || []).filter(Boolean);
    const asNode = h('input', {id: 'fork-as-node', value: nodes[0] || '', autocomplete: 'off', placeholder: '(none)'});
    const fill = () => {
      const p = fieldSel.value;
      otherWrap.hidden = p !== OTHER;
      if (p === OTHER) return;
      const v = getPath(s.values, p);
      isJson.checked = typeof v !== 'string';
      value.value = typeof v === 'string' ? v : v === undefined ? '' : json(v);
    };
    fieldSel.addEventListener('change', fill);
    fill();
    const status = h('p', {class: 'form-status', role: 'status', 'data-testid': 'fork-status'});
    const submit = async (resume) => {
      const path = fieldSel.value === OTHER ? otherPath.value.trim() : fieldSel.value;
      if (!path) return (status.textContent = 'Pick a field.');
      let v = value.value;
      if (isJson.checked) {
        try {
          v = JSON.parse(v);
        } catch (e) {
          status.textContent = `Not JSON: ${e.message}`;
          return;
        }
      }
      const body = {values: nest(path, v), checkpoint_id: s.checkpoint.checkpoint_id};
      if (asNode.value.trim()) body.as_node = asNode.value.trim();
      for (const b of buttons) b.disabled = true;
      status.textContent = 'Forking…';
      try {
        const res = await api('POST', `/threads/${this.id}/state`, body);
        const newId = res?.checkpoint?.checkpoint_id;
        let msg = `Forked: new checkpoint ${newId ? '#' + seqOf({checkpoint: {checkpoint_id: newId}}) : ''}`;
        if (resume) {
          const run = await api('POST', `/threads/${this.id}/runs`, {assistant_id: this.assistantId() || document.getElementById('run-assistant')?.value, stream_mode: STREAM_MODE});
          msg += `; run ${shortId(run.run_id)} resumes it.`;
          this.follow(run.run_id);
        }
        this.selected = newId || null;
        this.pinned = !!newId;
        this.detailFor = null;
        await this.refresh();
        // the detail re-rendered; say what happened there
        this.detailEl.querySelector('[data-testid="fork-status"]')?.replaceChildren(msg);
        threadsChanged();
      } catch (e) {
        status.textContent = e.message;
        for (const b of buttons) b.disabled = false;
      }
    };
    const buttons = [
      h('button', {type: 'button', onclick: () => submit(false)}, 'Fork'),
      h('button', {type: 'button', class: 'primary', onclick: () => submit(true)}, 'Fork and resume'),
    ];
    return h('form', {class: 'fork-form', 'aria-label': 'Fork from this checkpoint', 'data-testid': 'fork-form', onsubmit: (e) => { e.preventDefault(); submit(true); }},
      h('h3', {}, `Fork from #${n.seq}`),
      h('p', {class: 'muted small'}, 'Writes a new checkpoint on a branch from this one with the field changed (object fields merge: steps.draft changes only that step), then optionally resumes from it.'),
      h('div', {class: 'row gap wrap'},
        field('Field', fieldSel, {class: 'field'}),
        otherWrap,
        field('As node', asNode, {class: 'field'})),
      field('New value', value, {class: 'field'}),
      h('div', {class: 'row gap wrap'},
        h('label', {for: 'fork-json', class: 'check'}, isJson, ' Value is JSON'),
        h('span', {class: 'grow'}),
        buttons),
      status);
  }

  // followActive attaches the live view to the thread's running run.
  async followActive() {
    try {
      const runs = await api('GET', `/threads/${this.id}/runs?limit=10`);
      const r = (runs || []).find((x) => x.status === 'running' || x.status === 'pending');
      if (r && !this.closed) this.follow(r.run_id);
    } catch (e) {
      toast(e.message);
    }
  }

  // follow shows a run live: its steps, the tokens of each as they
  // stream, each step's commit, and a button to cancel it.
  follow(runId) {
    if (this.live?.runId === runId) return;
    this.live?.ctrl.abort();
    const ctrl = new AbortController();
    const steps = new Map();
    const stepsEl = h('ol', {class: 'live-steps'});
    const statusEl = h('span', {class: 'badge badge-running', 'data-testid': 'live-status'}, 'running');
    const noteEl = h('p', {class: 'live-note muted small', 'data-testid': 'live-note', role: 'status'});
    const cancel = h('button', {type: 'button', class: 'danger', onclick: async () => {
      cancel.disabled = true;
      try {
        await api('POST', `/threads/${this.id}/runs/${runId}/cancel?action=interrupt`);
        noteEl.textContent = 'Cancelling…';
      } catch (e) {
        toast(e.message);
        cancel.disabled = false;
      }
    }}, 'Cancel run');
    const live = {runId, ctrl};
    this.live = live;
    const steerForm = steerBox(this.id, (entry) => {
      noteEl.textContent = entry.kind === 'follow_up' ? `Follow-up #${entry.seq} queued: a run once this one ends.` : `Message #${entry.seq} sent: the run takes it at its next model call.`;
    });
    let sawUpdates = false, lastValues = null, events = 0;
    const setState = (st, state) => {
      st.el.dataset.state = state;
      st.el.className = `live-step st-${state.replace(/\s+/g, '-')}`;
      st.state.textContent = state;
    };
    const step = (node, initial = 'streaming') => {
      let st = steps.get(node);
      if (!st) {
        const tokens = h('span', {class: 'live-tokens', 'data-testid': 'live-tokens'});
        const state = h('span', {class: 'live-state tag', 'data-testid': 'live-step-state'});
        const el = h('li', {'data-testid': 'live-step', 'data-node': node},
          h('div', {class: 'live-step-head'}, h('strong', {}, node), state), h('div', {class: 'live-text'}, tokens, h('span', {class: 'caret'})));
        st = {el, tokens, state, text: ''};
        setState(st, initial);
        steps.set(node, st);
        stepsEl.append(el);
      } else if (initial === 'streaming' && ['waiting', 'running'].includes(st.el.dataset.state)) {
        setState(st, 'streaming');
      }
      return st;
    };
    // in a chain the first step still waiting is the one running
    const advance = () => {
      const all = [...steps.values()];
      if (all.some((x) => ['streaming', 'running'].includes(x.el.dataset.state))) return;
      const nextUp = all.find((x) => x.el.dataset.state === 'waiting');
      if (nextUp) setState(nextUp, 'running');
    };
    const commit = (node, update) => {
      const st = step(node);
      setState(st, 'committed');
      advance();
      if (!st.text) {
        const t = update?.steps?.[node];
        if (typeof t === 'string') st.tokens.textContent = st.text = t;
      }
    };
    clear(this.liveEl, h('section', {class: 'live panel', 'data-testid': 'live-run', 'data-run-id': runId, 'aria-label': 'Live run'},
      h('div', {class: 'section-head'}, h('h2', {}, 'Run ', h('span', {class: 'mono'}, shortId(runId))), statusEl, h('span', {class: 'grow'}), cancel,
        h('button', {type: 'button', class: 'ghost', 'aria-label': 'Close live run', onclick: () => { ctrl.abort(); clear(this.liveEl); if (this.live === live) this.live = null; }}, '×')),
      stepsEl, noteEl, steerForm));
    const onEvent = ({event, data}) => {
      events++;
      if (event.startsWith('messages') && Array.isArray(data)) {
        const [chunk, meta] = data;
        const node = meta?.langgraph_node || 'model';
        const text = typeof chunk?.content === 'string' ? chunk.content : Array.isArray(chunk?.content) ? chunk.content.map((p) => p.text || '').join('') : '';
        if (text) {
          const st = step(node);
          st.text += text;
          st.tokens.textContent = st.text;
        }
      } else if (event === 'updates' && data && typeof data === 'object') {
        sawUpdates = true;
        for (const [node, upd] of Object.entries(data)) {
          if (node === '__inbox__') {
            noteEl.textContent = steerNote(upd);
            continue;
          }
          if (node === '__interrupt__') {
            noteEl.textContent = 'Paused: waiting for approval.';
            for (const x of steps.values()) if (x.el.dataset.state === 'running') setState(x, 'waiting');
            continue;
          }
          commit(node, upd);
        }
        this.refreshSoon();
      } else if (event === 'values' && data && typeof data === 'object') {
        if (!sawUpdates && lastValues) {
          const before = lastValues.steps || {}, after = data.steps || {};
          for (const k of Object.keys(after)) if (before[k] !== after[k]) commit(k, {steps: {[k]: after[k]}});
          this.refreshSoon();
        }
        lastValues = data;
      } else if (event === 'error') {
        noteEl.textContent = `Error: ${typeof data === 'string' ? data : data?.message || data?.error || json(data)}`;
        noteEl.classList.add('error-text');
      } else if (event === 'metadata' && data?.attempt > 1) {
        noteEl.textContent = `Attempt ${data.attempt} (resumed after a restart).`;
      }
    };
    // the steps the run is expected to take, from the assistant's graph:
    // all of them for a run with input, else from the head's next step
    const plan = async () => {
      try {
        const run = await api('GET', `/threads/${this.id}/runs/${runId}`);
        const nodes = await graphOrder(run.assistant_id);
        const next = this.tree?.nodes.length ? this.tree.nodes[this.tree.nodes.length - 1].s.next || [] : [];
        const from = run.kwargs?.input == null && next.length ? Math.max(0, nodes.indexOf(next[0])) : 0;
        for (const n of nodes.slice(from)) step(n, 'waiting');
        advance();
      } catch {
        /* the plan is a hint; the stream shows what runs */
      }
    };
    plan().then(() => streamRun(this.id, runId, onEvent, ctrl.signal)).then(async () => {
      if (ctrl.signal.aborted) return;
      let run = null;
      try {
        run = await api('GET', `/threads/${this.id}/runs/${runId}`);
      } catch (e) {
        toast(e.message);
      }
      const st = run?.status || 'done';
      statusEl.textContent = st;
      statusEl.className = `badge badge-${st}`;
      cancel.remove();
      steerForm.remove();
      for (const s of steps.values()) if (s.el.dataset.state !== 'committed') setState(s, s.el.dataset.state === 'streaming' || (s.el.dataset.state === 'running' && s.text) ? 'stopped' : 'not run');
      if (noteEl.textContent === 'Cancelling…') noteEl.textContent = 'Cancelled.';
      if (!noteEl.textContent) noteEl.textContent = `${steps.size} step${steps.size === 1 ? '' : 's'}, ${events} events.`;
      if (this.live === live) this.live = {...live, done: true};
      if (st === 'error' || (st === 'interrupted' && run?.cancel_reason)) {
        // a failed or cancelled run can run again from its last checkpoint
        const retry = h('button', {type: 'button', 'data-testid': 'retry-run', onclick: async () => {
          retry.disabled = true;
          try {
            await api('POST', `/threads/${this.id}/runs/${runId}/retry`);
            this.live = null;
            this.follow(runId);
          } catch (e) {
            toast(e.message);
            retry.disabled = false;
          }
        }}, 'Retry run');
        statusEl.after(h('span', {class: 'grow'}), retry);
      }
      await this.refresh().catch((e) => this.fail(e));
      threadsChanged();
    }, (e) => {
      statusEl.textContent = 'stream lost';
      noteEl.textContent = e.message;
      noteEl.classList.add('error-text');
    });
  }
}
