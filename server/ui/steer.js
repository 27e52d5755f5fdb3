// Steering a running run from its live view: a message the run takes at
// its next model call, or a follow-up run once it ends (docs/steering.md).
import {h, toast} from './dom.js';
import {api} from './api.js';

// steerBox is the form under a live run: text, "Steer" and "Follow up".
// onSent gets the inbox entry the server accepted.
export function steerBox(threadId, onSent) {
  const input = h('input', {type: 'text', 'data-testid': 'steer-input', placeholder: 'Add to the running run (taken at its next model call)', 'aria-label': 'Message for the running run'});
  const send = async (followUp) => {
    const text = input.value.trim();
    if (!text) return;
    for (const b of buttons) b.disabled = true;
    try {
      const entry = await api('POST', `/threads/${threadId}/steer`, {message: text, follow_up: followUp});
      input.value = '';
      onSent(entry);
    } catch (e) {
      toast(e.message);
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  const buttons = [
    h('button', {type: 'submit', class: 'primary', 'data-testid': 'steer-button'}, 'Steer'),
    h('button', {type: 'button', 'data-testid': 'follow-up-button', onclick: () => send(true)}, 'Follow up'),
  ];
  return h('form', {class: 'steer-box', 'data-testid': 'steer-box', 'aria-label': 'Steer the running run', onsubmit: (e) => { e.preventDefault(); send(false); }}, input, ...buttons);
}

// steerNote says what a live run's stream reported of the inbox: the
// entries a step took ({entries, messages}).
export function steerNote(update) {
  const n = update?.entries?.length || 0;
  return `Took ${n} message${n === 1 ? '' : 's'} sent while it ran (#${(update?.entries || []).join(', #')}).`;
}
