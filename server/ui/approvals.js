// Pending approvals: every thread paused before a step, with what the
// step will act on, and approve / edit / reject.
import {h, clear, fmtAgo, fmtTime, shortId, json, isObj, field, toast, threadsChanged} from './dom.js';
import {api, getAssistants, ApiError} from './api.js';

// approvalCard shows one pending interrupt with its answers. thread (the
// thread, with values) is optional; onAnswered gets the run it started.
export function approvalCard(p, {thread, compact, onAnswered} = {}) {
  const values = thread?.values || {};
  const result = h('p', {class: 'approval-result', role: 'status', 'data-testid': 'approval-result'});
  const buttons = [];
  const setBusy = (b) => buttons.forEach((x) => (x.disabled = b));

  const answer = async (action, extra) => {
    setBusy(true);
    result.textContent = 'Sending…';
    try {
      const run = await api('POST', `/threads/${p.thread_id}/interrupts/${p.interrupt_id}/answer`, {action, ...extra});
      const verb = {approve: 'Approved', edit: 'Approved with edits', reject: 'Rejected'}[action];
      clear(result, `${verb}: run `, h('span', {class: 'mono'}, shortId(run?.run_id)), ' started. ',
        compact ? null : h('a', {href: `#/threads/${p.thread_id}`}, 'Open thread'));
      card.classList.add('answered');
      card.dataset.answered = action;
      editBox.hidden = rejectBox.hidden = true;
      refreshApprovalCount();
      threadsChanged();
      onAnswered?.(run);
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        result.textContent = `No longer pending: ${e.detail}`;
        card.classList.add('answered');
        refreshApprovalCount();
      } else {
        result.textContent = e.message;
        setBusy(false);
      }
    }
  };

  // Edit: the state fields to change before the step runs, or, for a
  // chat's tool review, the calls' arguments.
  const reqs = reviewRequests(p.value);
  const kind = reqs ? toolReview(p, values, reqs) : stateEdit(p, values);
  const editErr = h('span', {class: 'error-text small'});
  const editBox = h('div', {class: 'answer-box', hidden: true}, kind.fields,
    h('div', {class: 'row gap'}, track(h('button', {type: 'button', class: 'primary', onclick: () => {
      let v;
      try {
        v = kind.edits();
      } catch (e) {
        editErr.textContent = e.message;
        return;
      }
      editErr.textContent = '';
      answer('edit', {value: v});
    }}, 'Approve with edits')), editErr));

  const reason = h('input', {id: `reason-${p.thread_id}-${p.interrupt_id}`, autocomplete: 'off', placeholder: kind.review ? 'What the assistant reads instead (empty: the calls are ignored)' : 'Why not'});
  const rejectBox = h('div', {class: 'answer-box', hidden: true},
    field('Reason', reason, {class: 'field'}),
    h('div', {class: 'row gap'}, track(h('button', {type: 'button', class: 'danger', onclick: () => answer('reject', {reason: reason.value})}, 'Confirm reject'))));

  function track(b) {
    buttons.push(b);
    return b;
  }

  const actions = h('div', {class: 'row gap approval-actions'},
    track(h('button', {type: 'button', class: 'primary', onclick: () => answer('approve')}, 'Approve')),
    track(h('button', {type: 'button', 'aria-expanded': 'false', onclick: (e) => {
      editBox.hidden = !editBox.hidden;
      rejectBox.hidden = true;
      e.currentTarget.setAttribute('aria-expanded', String(!editBox.hidden));
      if (!editBox.hidden) editBox.querySelector('textarea')?.focus();
    }}, 'Edit…')),
    track(h('button', {type: 'button', 'aria-expanded': 'false', onclick: (e) => {
      rejectBox.hidden = !rejectBox.hidden;
      editBox.hidden = true;
      e.currentTarget.setAttribute('aria-expanded', String(!rejectBox.hidden));
      if (!rejectBox.hidden) reason.focus();
    }}, 'Reject…')));

  const {preview, input} = kind;

  const card = h('article', {class: `card approval${compact ? ' compact' : ''}`, 'data-testid': 'approval', 'data-thread-id': p.thread_id, 'data-interrupt-id': p.interrupt_id,
    'aria-label': `Approval for thread ${shortId(p.thread_id)}`},
    h('div', {class: 'approval-head'},
      h('h3', {}, compact ? 'Waiting for approval' : h('a', {href: `#/threads/${p.thread_id}`}, p.assistant_id || 'thread', ' ', h('span', {class: 'mono muted'}, shortId(p.thread_id)))),
      h('span', {class: 'muted small'}, kind.review ? 'tool calls to review in ' : 'before ', h('strong', {}, p.node || '?'), ` · ${fmtAgo(p.created_at)}`,
        p.expires_at ? ` · expires ${fmtTime(p.expires_at)}${p.fallback ? ` (then ${p.fallback})` : ''}` : '')),
    typeof input === 'string' ? h('p', {class: 'approval-input'}, h('span', {class: 'muted'}, 'Input: '), input) : null,
    preview ? h('div', {class: 'approval-preview'}, h('div', {class: 'side-label'}, kind.label), preview) : null,
    h('details', {class: 'block'}, h('summary', {}, 'Interrupt payload'), h('pre', {class: 'json', 'data-testid': 'approval-payload'}, json(p.value))),
    actions, editBox, rejectBox, result);
  return card;
}

// stateEdit is an approval of a step: the state it will act on (the
// steps of a chain, else the values) and edits of its fields.
function stateEdit(p, values) {
  const editable = {};
  for (const [k, v] of Object.entries(values)) if (k !== 'agent_id' && k !== 'input') editable[k] = v;
  const box = h('textarea', {id: `edit-${p.thread_id}-${p.interrupt_id}`, rows: 8, spellcheck: 'false', value: json(editable)});
  const steps = isObj(values.steps) ? values.steps : null;
  const preview = steps
    ? h('dl', {class: 'kv steps-preview'}, Object.entries(steps).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'string' ? v : json(v))]))
    : Object.keys(values).length ? h('pre', {class: 'json'}, json(values)) : null;
  const edits = () => {
    let v;
    try {
      v = JSON.parse(box.value);
    } catch (e) {
      throw new Error(`Not JSON: ${e.message}`);
    }
    if (!isObj(v)) throw new Error('Edits must be a JSON object of fields.');
    return v;
  };
  return {label: 'State the step will act on', preview, input: values.input?.content,
    fields: field('Edits (JSON: fields to change before the step runs)', box, {class: 'field'}), edits};
}

// reviewRequests reads a chat's review of tool calls, in either shape a
// chat asks in: LangChain's HITLRequest ({action_requests, review_configs})
// or agent-inbox's HumanInterrupt list. Each request is {name, args,
// description}; null when the interrupt is not a review of tool calls.
function reviewRequests(v) {
  if (isObj(v) && Array.isArray(v.action_requests) && v.action_requests.length && v.action_requests.every((r) => isObj(r) && typeof r.name === 'string')) {
    return v.action_requests.map((r) => ({name: r.name, args: r.args ?? {}, description: r.description}));
  }
  if (Array.isArray(v) && v.length && v.every((r) => isObj(r) && isObj(r.action_request) && typeof r.action_request.action === 'string')) {
    return v.map((r) => ({name: r.action_request.action, args: r.action_request.args ?? {}, description: r.description}));
  }
  return null;
}

// toolReview is a chat's review of tool calls: each call with its
// arguments, which an edit changes (keyed by the call's id, found in the
// last reply, else by the tool's name).
function toolReview(p, values, reqs) {
  const ids = reviewedCallIds(reqs, values.messages);
  const calls = reqs.map((r, i) => {
    const box = h('textarea', {id: `args-${p.thread_id}-${p.interrupt_id}-${i}`, rows: 4, spellcheck: 'false', value: json(r.args)});
    return {r, i, args: r.args, box, key: ids[i] || r.name};
  });
  const preview = h('dl', {class: 'kv tool-calls'}, calls.flatMap(({r, args}) => [
    h('dt', {'data-testid': 'tool-call'}, r.name),
    h('dd', {}, h('pre', {class: 'json'}, json(args)), r.description ? h('div', {class: 'muted small'}, r.description) : null)]));
  const fields = calls.map(({r, i, box}) => field(`Arguments of ${r.name}${calls.length > 1 ? ` (call ${i + 1})` : ''}`, box, {class: 'field'}));
  const edits = () => {
    const out = {};
    for (const {r, args, box, key} of calls) {
      let v;
      try {
        v = JSON.parse(box.value);
      } catch (e) {
        throw new Error(`Arguments of ${r.name}: not JSON: ${e.message}`);
      }
      if (!isObj(v)) throw new Error(`Arguments of ${r.name} must be a JSON object.`);
      if (JSON.stringify(v) !== JSON.stringify(args)) out[key] = v;
    }
    if (!Object.keys(out).length) throw new Error('No arguments were changed: Approve runs the calls as asked.');
    return out;
  };
  const asked = [...(values.messages || [])].reverse().find((m) => m?.type === 'human');
  return {review: true, label: 'Tool calls waiting for review', preview, input: textOf(asked?.content), fields, edits};
}

// reviewedCallIds matches the reviewed calls with the tool calls of the
// last reply, in order (the calls that wait are those of the tools that
// need review, so a name match in order is exact).
function reviewedCallIds(reqs, messages) {
  const reply = [...(messages || [])].reverse().find((m) => m?.type === 'ai' && Array.isArray(m.tool_calls) && m.tool_calls.length);
  const ids = [];
  let j = 0;
  for (const tc of reply?.tool_calls || []) {
    if (j < reqs.length && tc?.name === reqs[j].name) ids[j++] = tc.id;
  }
  return ids;
}

// textOf is a message's content as text (a list of content blocks joined).
function textOf(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((b) => (typeof b === 'string' ? b : b?.text || '')).join('');
  return undefined;
}

// renderApprovals is the #/approvals page.
export async function renderApprovals(root) {
  const listEl = h('div', {class: 'approvals', 'data-testid': 'approvals'});
  const filter = h('select', {id: 'approvals-assistant'}, h('option', {value: ''}, 'All assistants'));
  const load = async () => {
    try {
      const q = new URLSearchParams({status: 'pending', limit: '200'});
      if (filter.value) q.set('assistant_id', filter.value);
      const pending = await api('GET', `/interrupts?${q}`);
      const threads = await Promise.all(pending.map((p) => api('GET', `/threads/${p.thread_id}`).catch(() => null)));
      if (!pending.length) {
        clear(listEl, h('div', {class: 'empty'}, h('p', {}, 'Nothing is waiting for approval.'),
          h('p', {class: 'muted small'}, 'Runs of an assistant with interrupt_before (or approval) pause here before the step.')));
      } else {
        clear(listEl, pending.map((p, i) => approvalCard(p, {thread: threads[i]})));
      }
      setCount(pending.length, !!filter.value);
    } catch (e) {
      clear(listEl, h('p', {class: 'error-text'}, e.message));
    }
  };
  filter.addEventListener('change', load);
  clear(root, h('div', {class: 'page'},
    h('div', {class: 'title-row'}, h('h1', {}, 'Pending approvals'), h('span', {class: 'grow'}),
      field('Assistant', filter, {class: 'field inline'}),
      h('button', {type: 'button', onclick: load}, 'Refresh')),
    listEl));
  getAssistants().then((as) => as.forEach((a) => filter.append(h('option', {value: a.assistant_id}, a.name || a.assistant_id))), () => {});
  await load();
}

function setCount(n, partial) {
  const el = document.getElementById('approvals-count');
  if (!el || partial) return;
  el.textContent = String(n);
  el.hidden = n === 0;
}

export async function refreshApprovalCount() {
  try {
    const pending = await api('GET', '/interrupts?status=pending&limit=1000');
    setCount(pending.length);
  } catch {
    /* the count is a hint; errors show elsewhere */
  }
}
