// Track a job submitted elsewhere: Pollux follows it from its remote id.
import * as api from '../api.js';
import { h, mount, toast } from '../ui.js';
import { loadRoutes } from './overview.js';

export async function track(ctx, el) {
  const routeSel = h('select#t-route', { name: 'route', required: true });
  const remote = h('input#t-remote', { name: 'remote_id', required: true, spellcheck: false, placeholder: 'the provider’s id, e.g. 7x9qk2m4ndrj60cmzc6bz9kfq4' });
  const modelIn = h('input#t-model', { name: 'model', required: true, spellcheck: false, placeholder: 'owner/model' });
  const id = h('input#t-id', { name: 'id', spellcheck: false, placeholder: 'optional: derived from the remote id when empty', pattern: '[A-Za-z0-9_\\-]{1,128}' });
  const timeout = h('input#t-timeout', { name: 'timeout_s', type: 'number', min: 1, step: 1, placeholder: 'route default' });
  const webhook = h('select#t-webhook', { name: 'webhook' }, h('option', { value: '' }, 'route default'), h('option', { value: 'true' }, 'yes: the provider calls back'), h('option', { value: 'false' }, 'no: poll only'));
  const error = h('p.form-error#track-error', { hidden: true });
  const can = ctx.canAct();
  const submit = h('button.btn.primary#t-submit', { type: 'submit', disabled: !can, title: can ? '' : ctx.readOnlyWhy }, 'Track job');
  const form = h('form.card.form-card', {
    on: {
      submit: async (ev) => {
        ev.preventDefault();
        error.hidden = true;
        const body = { v: 1, route: routeSel.value, remote_id: remote.value.trim(), model: modelIn.value.trim() };
        if (id.value.trim()) body.id = id.value.trim();
        if (timeout.value) body.timeout_s = Number(timeout.value);
        if (webhook.value) body.webhook = webhook.value === 'true';
        submit.disabled = true;
        try {
          const res = await api.post('/v1/jobs/track', body);
          toast('Tracking', 'ok');
          ctx.go(`#/jobs/${encodeURIComponent(res.id)}?route=${encodeURIComponent(res.route || body.route)}`);
        } catch (err) {
          error.hidden = false;
          error.textContent = err.field ? `${err.field}: ${err.message}` : err.message;
          submit.disabled = false;
        }
      },
    },
  },
  h('p.muted', 'Hand Pollux a job you submitted to a provider yourself. It polls (and takes webhooks for) it like any other, and publishes its events.'),
  can ? null : h('p.notice.warn', 'This session is read-only: it cannot track jobs.'),
  h('div.form-grid',
    h('label.field', h('span', 'Route'), routeSel),
    h('label.field', h('span', 'Model'), modelIn),
    h('label.field.wide', h('span', 'Remote id'), remote),
    h('label.field', h('span', 'Job id'), id),
    h('label.field', h('span', 'Give up after (s)'), timeout),
    h('label.field', h('span', 'Webhook'), webhook)),
  error,
  h('div.form-actions', submit));
  // The same request from a script, kept in step with the form.
  const curl = h('pre.raw#t-curl');
  function body() {
    const b = { v: 1, route: routeSel.value || 'ROUTE', remote_id: remote.value.trim() || 'REMOTE_ID', model: modelIn.value.trim() || 'OWNER/MODEL' };
    if (id.value.trim()) b.id = id.value.trim();
    if (timeout.value) b.timeout_s = Number(timeout.value);
    if (webhook.value) b.webhook = webhook.value === 'true';
    return b;
  }
  function renderCurl() {
    const auth = ctx.session && ctx.session.auth ? '  -H "Authorization: Bearer $TOKEN" \\\n' : '';
    curl.textContent = `curl -X POST ${location.origin}/v1/jobs/track \\\n${auth}  -H "Content-Type: application/json" \\\n  -d '${JSON.stringify(body())}'`;
  }
  form.addEventListener('input', renderCurl);
  form.addEventListener('change', renderCurl);
  mount(el, h('div.page-head', h('h1', 'Track a job')),
    h('div.track-grid', form,
      h('section.card.track-help',
        h('h2', 'From a script'),
        h('p.muted', 'The same request from a shell; the answer names the job’s id and its links. Its events follow on /v1/jobs/{id}/events, or on NATS at its event subject.'),
        curl)));
  try {
    const routes = await loadRoutes();
    mount(routeSel, routes.map((r) => h('option', { value: r.name }, r.name)));
  } catch (err) {
    toast(`The routes did not load: ${err.message}`, 'error');
  }
  renderCurl();
}
