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

  // Edit: the state fields to change before the step runs.
  const editable = {};
  for (const [k, v] of Object.entries(values)) if (k !== 'agent_id' && k !== 'input') editable[k] = v;
  const edits = h('textarea', {id: `edit-${p.interrupt_id}`, rows: 8, spellcheck: 'false', value: json(editable)});
  const editErr = h('span', {class: 'error-text small'});
  const editBox = h('div', {class: 'answer-box', hidden: true},
    field('Edits (JSON: fields to change before the step runs)', edits, {class: 'field'}),
    h('div', {class: 'row gap'}, track(h('button', {type: 'button', class: 'primary', onclick: () => {
      let v;
      try {
        v = JSON.parse(edits.value);
      } catch (e) {
        editErr.textContent = `Not JSON: ${e.message}`;
        return;
      }
      if (!isObj(v)) {
        editErr.textContent = 'Edits must be a JSON object of fields.';
        return;
      }
      editErr.textContent = '';
      answer('edit', {value: v});
    }}, 'Approve with edits')), editErr));

  const reason = h('input', {id: `reason-${p.interrupt_id}`, autocomplete: 'off', placeholder: 'Why not'});
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
      if (!editBox.hidden) edits.focus();
    }}, 'Edit…')),
    track(h('button', {type: 'button', 'aria-expanded': 'false', onclick: (e) => {
      rejectBox.hidden = !rejectBox.hidden;
      editBox.hidden = true;
      e.currentTarget.setAttribute('aria-expanded', String(!rejectBox.hidden));
      if (!rejectBox.hidden) reason.focus();
    }}, 'Reject…')));

  const steps = isObj(values.steps) ? values.steps : null;
  const preview = steps
    ? h('dl', {class: 'kv steps-preview'}, Object.entries(steps).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'string' ? v : json(v))]))
    : Object.keys(values).length ? h('pre', {class: 'json'}, json(values)) : null;
  const input = values.input?.content;

  const card = h('article', {class: `card approval${compact ? ' compact' : ''}`, 'data-testid': 'approval', 'data-thread-id': p.thread_id, 'data-interrupt-id': p.interrupt_id,
    'aria-label': `Approval for thread ${shortId(p.thread_id)}`},
    h('div', {class: 'approval-head'},
      h('h3', {}, compact ? 'Waiting for approval' : h('a', {href: `#/threads/${p.thread_id}`}, p.assistant_id || 'thread', ' ', h('span', {class: 'mono muted'}, shortId(p.thread_id)))),
      h('span', {class: 'muted small'}, `before `, h('strong', {}, p.node || '?'), ` · ${fmtAgo(p.created_at)}`,
        p.expires_at ? ` · expires ${fmtTime(p.expires_at)}${p.fallback ? ` (then ${p.fallback})` : ''}` : '')),
    typeof input === 'string' ? h('p', {class: 'approval-input'}, h('span', {class: 'muted'}, 'Input: '), input) : null,
    preview ? h('div', {class: 'approval-preview'}, h('div', {class: 'side-label'}, 'State the step will act on'), preview) : null,
    h('details', {class: 'block'}, h('summary', {}, 'Interrupt payload'), h('pre', {class: 'json', 'data-testid': 'approval-payload'}, json(p.value))),
    actions, editBox, rejectBox, result);
  return card;
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
