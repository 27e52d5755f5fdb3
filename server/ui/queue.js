// The #/queue page: runs pending and running by assistant, the workers
// holding threads and River's jobs by state (GET /queue), refreshed every
// two seconds while it is on screen.
import {h, clear} from './dom.js';
import {api} from './api.js';

const JOB_STATES = ['available', 'running', 'scheduled', 'retryable', 'completed', 'cancelled', 'discarded'];

function fmtWait(s) {
  if (!s) return '';
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function table(label, head, rows, empty) {
  if (!rows.length) return h('p', {class: 'muted small'}, empty);
  return h('table', {class: 'queue-table', 'aria-label': label, 'data-testid': `queue-${label.toLowerCase()}`},
    h('thead', {}, h('tr', {}, head.map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {'data-key': r[0]}, r.map((c, i) => (i === 0 ? h('th', {scope: 'row'}, c) : h('td', {}, String(c))))))));
}

function render(el, q) {
  const totals = h('p', {class: 'queue-totals', 'data-testid': 'queue-totals'},
    h('strong', {}, String(q.pending)), ' pending · ', h('strong', {}, String(q.running)), ' running',
    q.queued ? ` · ${(q.workers || []).length} worker${(q.workers || []).length === 1 ? '' : 's'} holding threads` : ' · runs execute in this server (no queue)');
  const parts = [totals,
    h('h2', {}, 'Assistants'),
    table('Assistants', ['Assistant', 'Pending', 'Running', 'Oldest wait'],
      (q.assistants || []).map((a) => [a.assistant_id, a.pending, a.running, fmtWait(a.oldest_pending_seconds)]), 'No run is waiting or running.')];
  if (q.queued) {
    parts.push(h('h2', {}, 'Workers'),
      table('Workers', ['Worker', 'Threads'], (q.workers || []).map((w) => [w.worker_id, w.threads]), 'No worker holds a thread right now.'));
  }
  if (q.jobs) {
    parts.push(h('h2', {}, 'Jobs'),
      table('Jobs', ['Queue', ...JOB_STATES], Object.entries(q.jobs).sort().map(([name, st]) => [name, ...JOB_STATES.map((s) => st[s] || 0)]), 'No job yet.'));
  }
  clear(el, parts);
}

// renderQueue is the #/queue page.
export async function renderQueue(root) {
  const el = h('div', {class: 'queue', 'data-testid': 'queue'});
  clear(root, h('div', {class: 'page'},
    h('div', {class: 'title-row'}, h('h1', {}, 'Queue'), h('span', {class: 'grow'})),
    el));
  const load = async () => {
    try {
      render(el, await api('GET', '/queue'));
    } catch (e) {
      clear(el, h('p', {class: 'error-text'}, e.message));
    }
  };
  await load();
  const timer = setInterval(() => {
    if (!root.contains(el)) clearInterval(timer);
    else if (document.visibilityState === 'visible') load();
  }, 2000);
}
