// Submit a job: the form of POST /v1/jobs. The input must be a JSON
// object before it is sent; the front door's refusal names the field at
// fault, which the form marks.
import * as api from '../api.js';
import { h, mount, toast, notice, parseObject } from '../ui.js';
import { loadRoutes } from './overview.js';

export async function submitView(ctx, el) {
  if (!ctx.canAct()) {
    mount(el, h('div.page-head', h('h1', 'Submit a job')), notice('This session is read-only: it cannot submit jobs.', 'warn'));
    return undefined;
  }
  const routeSel = h('select#s-route', { name: 'route', required: true });
  const modelIn = h('input#s-model', { name: 'model', required: true, spellcheck: false, placeholder: 'owner/model', list: 's-models' });
  const models = h('datalist#s-models');
  const input = h('textarea#s-input.json', { name: 'input', rows: 8, spellcheck: false, required: true });
  input.value = '{\n  "prompt": ""\n}';
  const id = h('input#s-id', { name: 'id', spellcheck: false, placeholder: 'optional: Pollux makes one', pattern: '[A-Za-z0-9_\\-]{1,128}' });
  const key = h('input#s-key', { name: 'idempotency_key', spellcheck: false, placeholder: 'optional: the same key is the same job' });
  const reason = h('input#s-reason', { name: 'reason', maxlength: 1024, placeholder: 'optional: why, kept with the job' });
  const error = h('p.form-error#submit-error', { hidden: true, role: 'alert' });
  const submit = h('button.btn.primary#s-submit', { type: 'submit' }, 'Submit job');
  // The field a refusal names ("input", "id", …) and the control showing it.
  const controls = { route: routeSel, model: modelIn, input, id, idempotency_key: key, reason };

  function fault(field, message) {
    for (const c of Object.values(controls)) c.removeAttribute('aria-invalid');
    const top = (field || '').split(/[.[]/)[0];
    const c = controls[top];
    if (c) { c.setAttribute('aria-invalid', 'true'); c.focus(); }
    error.hidden = !message;
    error.dataset.field = field || '';
    // The front door's messages often name their field already.
    error.textContent = !field || (message || '').startsWith(`${field}:`) ? message || '' : `${field}: ${message}`;
  }

  const form = h('form.card.form-card#submit-form', {
    novalidate: true,
    on: {
      submit: async (ev) => {
        ev.preventDefault();
        fault('', '');
        if (!modelIn.value.trim()) { fault('model', 'name the model'); return; }
        const parsed = parseObject(input.value);
        if (parsed.error) { fault('input', parsed.error); return; }
        const body = { v: 1, route: routeSel.value, model: modelIn.value.trim(), input: parsed.value };
        if (id.value.trim()) body.id = id.value.trim();
        if (key.value.trim()) body.idempotency_key = key.value.trim();
        if (reason.value.trim()) body.reason = reason.value.trim();
        submit.disabled = true;
        try {
          const res = await api.submit(body);
          toast(`Submitted ${res.id}`, 'ok');
          ctx.go(`#/jobs/${encodeURIComponent(res.id)}?route=${encodeURIComponent(res.route || body.route)}`);
        } catch (err) {
          fault(err.field, err.message);
          submit.disabled = false;
        }
      },
    },
  },
  h('p.muted', 'Pollux submits the job to the route’s provider once and tracks it to its end. The same request from a script is POST /v1/jobs.'),
  h('div.form-grid',
    h('label.field', h('span', 'Route'), routeSel),
    h('label.field', h('span', 'Model'), modelIn, models),
    h('label.field.wide', h('span', 'Input (a JSON object, passed to the provider as is)'), input),
    h('label.field', h('span', 'Job id'), id),
    h('label.field', h('span', 'Idempotency key'), key),
    h('label.field.wide', h('span', 'Reason'), reason)),
  error,
  h('div.form-actions', h('a.btn', { href: '#/jobs' }, 'Back to the jobs'), submit));
  mount(el, h('nav.crumbs', h('a', { href: '#/jobs' }, 'Jobs'), ' / submit'), h('div.page-head', h('h1', 'Submit a job')), form);
  try {
    const routes = await loadRoutes();
    mount(routeSel, routes.map((r) => h('option', { value: r.name }, r.name)));
  } catch (err) {
    toast(`The routes did not load: ${err.message}`, 'error');
  }
  api.get('/v1/models').then((body) => {
    const list = Array.isArray(body) ? body : (body && body.models) || [];
    const names = [...new Set(list.map((m) => (typeof m === 'string' ? m : m.model || m.name)).filter(Boolean))].sort();
    mount(models, names.map((n) => h('option', { value: n })));
  }).catch(() => {});
  return undefined;
}
