// DOM helpers, formatting and the dialogs every view shares. Data reaches
// the page only as text nodes and attributes, never as markup.

/** h('tag.class#id', {attrs, on: {click}}, ...children) builds an element. */
export function h(spec, attrs, ...children) {
  if (attrs === null || typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs)) {
    children.unshift(attrs);
    attrs = {};
  }
  const [, tag = 'div', rest = ''] = spec.match(/^([a-z0-9-]*)(.*)$/i);
  const el = document.createElement(tag || 'div');
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === '.') el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === 'class') el.className += ` ${v}`;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces el's children. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/**
 * Replaces el's children after its first child, keep, which stays in
 * the document: a control a live update must not take away from under
 * the user's pointer or keyboard focus.
 */
export function mountAfter(el, keep, ...children) {
  while (el.lastChild && el.lastChild !== keep) el.lastChild.remove();
  append(el, children);
  return el;
}

export const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'expired', 'lost']);
export const STATES = ['pending', 'queued', 'running', 'succeeded', 'failed', 'canceled', 'expired', 'lost'];

/** A coloured chip for a job state, route state or event type. */
export function chip(value, extra) {
  const v = String(value || 'unknown');
  return h(`span.chip.s-${v.replace(/[^a-z_]/gi, '')}`, { title: extra || v, 'data-state': v }, v.replace(/_/g, ' '));
}

/** Monospace id text, selectable, with the whole value as its title. */
export function mono(v, cls = '') {
  return h(`span.mono${cls ? `.${cls}` : ''}`, { title: v || '' }, v || '—');
}

export function time(v) {
  if (!v) return null;
  const t = new Date(v);
  return Number.isNaN(t.getTime()) || t.getFullYear() < 1971 ? null : t;
}

const pad = (n) => String(n).padStart(2, '0');

/** 2026-12-02 05:04:03 in local time. */
export function fmtTime(v) {
  const t = time(v);
  if (!t) return '—';
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
}

/** 05:04:03.120 in local time. */
export function fmtClock(v) {
  const t = time(v);
  if (!t) return '—';
  return `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${String(t.getMilliseconds()).padStart(3, '0')}`;
}

/** A time of day when v is within the next or last 12 hours, else the full time. */
export function fmtNear(v) {
  const t = time(v);
  if (!t) return '—';
  return Math.abs(t - Date.now()) < 12 * 3600e3 ? fmtClock(v).slice(0, 8) : fmtTime(v);
}

/** A duration in seconds as 850ms, 12.3s, 4m 05s, 2h 10m, 3d 4h. */
export function fmtDur(s) {
  if (s === undefined || s === null || Number.isNaN(s)) return '—';
  const neg = s < 0;
  s = Math.abs(s);
  let out;
  if (s < 1) out = `${Math.round(s * 1000)}ms`;
  else if (s < 60) out = `${s < 10 ? s.toFixed(1) : Math.round(s)}s`;
  else if (s < 3600) out = `${Math.floor(s / 60)}m ${pad(Math.floor(s % 60))}s`;
  else if (s < 86400) out = `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  else out = `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
  return neg ? `-${out}` : out;
}

/** How long ago v was: "12s ago", or "in 3s" for the future. */
export function ago(v, now = Date.now()) {
  const t = time(v);
  if (!t) return '—';
  const s = (now - t.getTime()) / 1000;
  if (Math.abs(s) < 1) return 'now';
  return s >= 0 ? `${fmtDur(s)} ago` : `in ${fmtDur(-s)}`;
}

/** A <time> element showing ago(v), with the absolute time as its title. */
export function when(v) {
  const t = time(v);
  if (!t) return h('span.muted', '—');
  return h('time', { datetime: t.toISOString(), title: fmtTime(v), 'data-ago': t.toISOString() }, ago(v));
}

/** Refreshes every when() element under root. */
export function tick(root = document) {
  const now = Date.now();
  for (const el of root.querySelectorAll('time[data-ago]')) el.textContent = ago(el.dataset.ago, now);
}

export function fmtNum(n, digits = 0) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fmtPct(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '—';
  return `${(x * 100).toFixed(x >= 0.995 || x === 0 ? 0 : 1)}%`;
}

/** A toast in the corner; kind is ok, error or info. */
export function toast(message, kind = 'info') {
  const el = h(`div.toast.${kind}`, { role: kind === 'error' ? 'alert' : 'status' }, message);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 3000);
}

/**
 * Asks for confirmation in a modal dialog with a reason field; resolves to
 * {reason, ...extra field values} or null when dismissed.
 * opts: {title, body, confirm, danger, reasonRequired, fields: [{name, label, el}],
 * reason (its initial value), error (a message shown at once), validate(out)
 * (an error message keeps the dialog open)}
 */
export function confirmDialog(opts) {
  return new Promise((resolve) => {
    const reason = h('textarea', { name: 'reason', rows: 2, maxlength: 512, placeholder: opts.reasonPlaceholder || 'Why? (kept with the event)', required: !!opts.reasonRequired });
    reason.value = opts.reason || '';
    const error = h('p.form-error', { hidden: !opts.error, role: 'alert' }, opts.error || '');
    const extra = (opts.fields || []).map((f) => h('label.field', h('span', f.label), f.el));
    const ok = h(`button.btn${opts.danger ? '.danger' : '.primary'}`, { type: 'submit', value: 'ok', 'data-confirm': '' }, opts.confirm || 'Confirm');
    const cancel = h('button.btn', { type: 'button', on: { click: () => dlg.close('') } }, 'Back');
    const form = h('form', { method: 'dialog' },
      h('h2', opts.title),
      opts.body ? h('div.dialog-body', opts.body) : null,
      extra,
      h('label.field', h('span', opts.reasonRequired ? 'Reason' : 'Reason (optional)'), reason),
      error,
      h('div.dialog-actions', cancel, ok));
    const dlg = h('dialog.dialog', form);
    function values() {
      const out = { reason: reason.value.trim() };
      for (const f of opts.fields || []) out[f.name] = f.el.value;
      return out;
    }
    form.addEventListener('submit', (ev) => {
      if (opts.reasonRequired && !reason.value.trim()) {
        ev.preventDefault();
        error.hidden = false;
        error.textContent = 'Say why: the reason is recorded with the event.';
        reason.focus();
        return;
      }
      const why = opts.validate && opts.validate(values());
      if (why) {
        ev.preventDefault();
        error.hidden = false;
        error.textContent = why;
        return;
      }
      dlg.returnValue = 'ok';
    });
    dlg.addEventListener('close', () => {
      const done = dlg.returnValue === 'ok';
      dlg.remove();
      resolve(done ? values() : null);
    });
    document.body.append(dlg);
    dlg.showModal();
    reason.focus();
  });
}

/** A key/value grid; rows are [label, value] pairs, null rows skipped. */
export function kv(rows) {
  return h('dl.kv', rows.filter(Boolean).map(([k, v]) => [h('dt', k), h('dd', v ?? '—')]));
}

/** An empty-state or error panel. */
export function notice(text, kind = 'muted') {
  return h(`div.notice.${kind}`, text);
}

/**
 * Parses text as a JSON object (a provider input): {value} or {error},
 * the error naming what is wrong.
 */
export function parseObject(text) {
  let v;
  try { v = JSON.parse(text); } catch (err) { return { error: `not JSON: ${err.message}` }; }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return { error: 'must be a JSON object, {…}' };
  return { value: v };
}
