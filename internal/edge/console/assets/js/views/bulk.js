// Acting on many jobs: a bulk cancel or resubmit on a selection ({ids})
// or on every job a filter matches ({filter}), counted by a dry run first
// and confirmed in a dialog with that count; the front door acts only on
// as many jobs as were confirmed.
import * as api from '../api.js';
import { h, mount, confirmDialog, toast, fmtNum } from '../ui.js';

const VERB = { cancel: 'Cancel', resubmit: 'Resubmit' };
const DONE = { cancel: 'Cancel', resubmit: 'Resubmission' };

const NOTE = {
  cancel: 'Pollux asks each job’s provider to cancel it. Jobs that have finished are skipped; the outcome of each shows in its timeline.',
  resubmit: 'Each failed, lost or expired job is submitted again as a new job linked to it. Other jobs are skipped, and so are jobs that reached their provider: Pollux keeps no input after that (resubmit those one by one, with their input).',
};

/**
 * Counts the jobs target selects, asks to confirm action on them, and acts;
 * resolves to the front door's result, or null when nothing was done. A
 * count that changed before the confirm reaches the front door asks again
 * with the new count.
 */
export async function bulkAction(action, target, what) {
  const verb = VERB[action];
  let dry;
  try {
    dry = await api.bulk(action, target);
  } catch (err) {
    toast(`${verb} failed: ${err.message}`, 'error');
    return null;
  }
  let reason = '';
  let error = '';
  for (;;) {
    const n = dry.matched;
    if (!n) {
      toast('No job matches any more: nothing to do.', 'info');
      return null;
    }
    const jobs = `${fmtNum(n)} ${n === 1 ? 'job' : 'jobs'}`;
    const sample = dry.sample || [];
    const res = await confirmDialog({
      title: `${verb} ${jobs}?`,
      body: [
        h('p.bulk-count', { 'data-matched': String(n) }, h('b', jobs), ` ${what}, counted just now.`),
        h('ul.sample.mono', sample.map((id) => h('li', id)),
          n > sample.length ? h('li.muted', `… and ${fmtNum(n - sample.length)} more`) : null),
        h('p', NOTE[action]),
      ],
      confirm: `${verb} ${jobs}`,
      danger: action === 'cancel',
      reason,
      error,
    });
    if (!res) return null;
    reason = res.reason;
    try {
      return await api.bulk(action, target, reason, n);
    } catch (err) {
      if (err.status !== 409) {
        toast(`${verb} failed: ${err.message}`, 'error');
        return null;
      }
      // The jobs changed since they were counted: count again and ask.
      try {
        dry = await api.bulk(action, target);
      } catch (err2) {
        toast(`${verb} failed: ${err2.message}`, 'error');
        return null;
      }
      error = `The jobs changed meanwhile: ${fmtNum(dry.matched)} match now, not ${fmtNum(n)}. Look again, and confirm.`;
    }
  }
}

/** Shows a bulk action's result in el: what was done, and why jobs were skipped. */
export function showResult(el, res, onClose) {
  const skipped = res.results.filter((r) => r.outcome !== 'accepted');
  const accepted = res.results.filter((r) => r.outcome === 'accepted');
  const link = (id) => h('a.mono', { href: `#/jobs/${encodeURIComponent(id)}` }, id);
  mount(el, h('section.card.bulk-result#bulk-result', { 'data-accepted': String(res.accepted), 'data-skipped': String(res.skipped) },
    h('div.card-head',
      h('h2', `${DONE[res.action]}: ${fmtNum(res.accepted)} accepted, ${fmtNum(res.skipped)} skipped`),
      h('div.spacer'),
      h('button.btn.small#bulk-result-close', { type: 'button', on: { click: () => { mount(el); if (onClose) onClose(); } } }, 'Close')),
    skipped.length ? h('ul.bulk-items.skipped', skipped.map((r) => h('li', { 'data-id': r.id }, link(r.id), ' ', h('span.reason.err', r.why || r.code || 'skipped')))) : null,
    accepted.length ? h('ul.bulk-items.accepted', accepted.map((r) => h('li', { 'data-id': r.id }, link(r.id),
      r.new_id ? [' → ', link(r.new_id)] : null))) : null));
  const toastKind = res.skipped ? 'info' : 'ok';
  toast(`${DONE[res.action]}: ${res.accepted} accepted, ${res.skipped} skipped`, toastKind);
}
