// One job: its record and its event timeline, followed live until the
// job ends.
import * as api from '../api.js';
import { h, mount, chip, mono, when, fmtTime, fmtClock, fmtDur, fmtNum, toast, confirmDialog, kv, notice, parseObject, TERMINAL, time } from '../ui.js';

// The states a job may be resubmitted from (jobs.Resubmittable).
const RESUBMITTABLE = new Set(['failed', 'lost', 'expired']);

const TYPES = ['submitted', 'queued', 'running', 'progress', 'succeeded', 'failed', 'canceled', 'expired', 'lost', 'rejected'];

export async function job(ctx, el, id) {
  let route = ctx.params.get('route') || '';
  let rec = null; // the latest record: from GET or the latest event's snapshot
  let deliveries = []; // its outbound webhook deliveries, by endpoint
  let es = null;
  const events = [];

  const head = h('div.page-head.job-head');
  const record = h('section.card#record');
  const timeline = h('ol.timeline#timeline');
  const tlState = h('span.live#tl-state', 'connecting');
  const raw = h('pre.raw');

  mount(el,
    h('nav.crumbs', h('a', { href: '#/jobs' }, 'Jobs'), ' / ', route ? [h('a', { href: `#/jobs?route=${encodeURIComponent(route)}` }, route), ' / '] : null, h('span.mono', id)),
    head,
    h('div.job-grid',
      record,
      h('section.card.timeline-card',
        h('div.card-head', h('h2', 'Timeline'), h('div.spacer'), tlState),
        h('div#phases'),
        timeline)),
    h('details.card.raw-card', h('summary', 'Record as JSON'), raw));

  function render() {
    const j = rec || { id, route, state: 'pending' };
    const terminal = TERMINAL.has(j.state);
    const can = ctx.canAct();
    const cancelBtn = h('button.btn.danger#cancel', {
      type: 'button', disabled: terminal || !can || !rec,
      title: !can ? ctx.readOnlyWhy : terminal ? `The job has finished (${j.state})` : 'Ask the provider to cancel this job',
      on: { click: cancel },
    }, 'Cancel job');
    // Read-only sessions are not offered a resubmission at all.
    const resubmitBtn = can && rec && RESUBMITTABLE.has(j.state) ? h('button.btn#resubmit', {
      type: 'button', title: 'Submit this job again as a new job, linked to this one', on: { click: resubmit },
    }, 'Resubmit') : null;
    mount(head,
      h('h1', h('span.mono.id-title', { title: id }, id)),
      chip(j.state),
      j.tracked ? h('span.tag', 'tracked') : null,
      h('div.spacer'),
      h('span.muted', j.model ? h('a', { href: `#/models/${encodeURIComponent(j.route || route)}/${encodeURIComponent(j.model)}` }, j.model) : null),
      resubmitBtn,
      cancelBtn);
    if (!rec) {
      mount(record, h('div.card-head', h('h2', 'Record')), notice('No record yet: ingest has not taken this job, or it was rejected. Its events appear on the right as they happen.'));
      return;
    }
    const dur = (a, b) => (time(a) && time(b) ? fmtDur((time(b) - time(a)) / 1000) : null);
    const progress = typeof j.progress === 'number'
      ? h('span.progress', h('meter', { min: 0, max: 1, value: j.progress }), ` ${Math.round(j.progress * 100)}%`) : null;
    const outputs = (j.outputs || []).length ? h('ul.outputs', j.outputs.map((u) => h('li', safeLink(u)))) : null;
    const meta = Object.entries(j.metadata || {});
    mount(record,
      h('div.card-head', h('h2', 'Record'), h('div.spacer'), h('span.muted.small', 'updated ', when(j.updated_at))),
      kv([
        ['Route', j.route],
        ['Model', j.model ? [j.model, j.config_key ? h('span.muted', ` (${j.config_key})`) : null] : '—'],
        ['Remote id', mono(j.remote_id)],
        j.idempotency_key ? ['Idempotency key', mono(j.idempotency_key)] : null,
        j.submitted_by || j.submit_reason ? ['Submitted by', h('span#submitted-by', j.submitted_by || '—', j.submit_reason ? [' — ', h('q', j.submit_reason)] : null)] : null,
        j.resubmit_of ? ['Resubmit of', h('span#resubmit-of', jobLink(j.resubmit_of, j.route))] : null,
        (j.resubmitted_as || []).length ? ['Resubmitted as', h('span#resubmitted-as', j.resubmitted_as.map((x, i) => [i ? ', ' : '', jobLink(x, j.route)]))] : null,
        ['Provider status', j.provider_status || '—'],
        j.reason ? ['Reason', h('span.reason', j.reason)] : null,
        j.waiting_for && j.state === 'pending' ? ['Waiting for', h('span.reason', j.waiting_for)] : null,
        j.last_error ? ['Last error', h('span.reason.err', j.last_error)] : null,
        progress ? ['Progress', progress] : null,
        typeof j.queue_position === 'number' ? ['Queue position', fmtNum(j.queue_position)] : null,
        ['Polls', [fmtNum(j.polls || 0), j.webhooks ? h('span.muted', ` · ${fmtNum(j.webhooks)} webhook${j.webhooks === 1 ? '' : 's'}`) : null, j.polls_open ? h('span.muted', ' (one more may come)') : null]],
        time(j.last_polled_at) ? ['Last polled', when(j.last_polled_at)] : null,
        !terminal && time(j.next_check_at) ? ['Next check due', [when(j.next_check_at), h('span.muted', ` · ${fmtClock(j.next_check_at)}`)]] : null,
        ['Created', [fmtTime(j.created_at), ' ', h('span.muted', '(', when(j.created_at), ')')]],
        time(j.submitted_at) ? ['Submitted', [fmtTime(j.submitted_at), dur(j.created_at, j.submitted_at) ? h('span.muted', ` +${dur(j.created_at, j.submitted_at)}`) : null]] : null,
        time(j.started_at) ? ['Started', [fmtTime(j.started_at), h('span.muted', ` +${dur(j.created_at, j.started_at)}`)]] : null,
        time(j.completed_at) ? ['Completed', [fmtTime(j.completed_at), h('span.muted', ` +${dur(j.created_at, j.completed_at)}`)]] : null,
        time(j.detected_at) ? ['Detected', [fmtTime(j.detected_at), h('span.muted', ` ${dur(j.completed_at, j.detected_at) || ''} after completion`), j.detected_by ? [' by ', chip(j.detected_by)] : null]] : null,
        time(j.deadline) ? ['Deadline', [fmtTime(j.deadline), ' ', h('span.muted', '(', when(j.deadline), ')')]] : null,
        time(j.cancel_requested_at) ? ['Cancel requested', h('span#cancel-requested', fmtTime(j.cancel_requested_at),
          j.cancel_requested_by ? [' by ', h('b', j.cancel_requested_by)] : null, j.cancel_reason ? [' — ', h('q', j.cancel_reason)] : null)] : null,
        outputs ? ['Outputs', outputs] : null,
        deliveries.length ? ['Outbound webhooks', h('ul.deliveries#deliveries', deliveries.map((d) => h('li', { 'data-endpoint': d.endpoint, 'data-state': d.state },
          h('span.mono', d.endpoint), ' ', chip(d.state), ` event #${d.seq}, ${fmtNum(d.attempts)} attempt${d.attempts === 1 ? '' : 's'}`,
          d.total_attempts > d.attempts ? h('span.muted', ` (${fmtNum(d.total_attempts)} in all)`) : null,
          d.last ? [' · last ', h('span.reason', d.last), ' ', when(d.last_at)] : null,
          time(d.next_at) ? [' · next ', when(d.next_at)] : null)))] : null,
        time(j.outputs_expire_at) ? ['Outputs expire', [fmtTime(j.outputs_expire_at), ' ', h('span.muted', '(', when(j.outputs_expire_at), ')')]] : null,
        j.late ? ['Late observation', `${j.late.state} by ${j.late.source} at ${fmtTime(j.late.at)}`] : null,
        meta.length ? ['Metadata', h('dl.meta', meta.map(([k, v]) => [h('dt.mono', k), h('dd.mono', v)]))] : null,
      ]));
    raw.textContent = JSON.stringify(j, null, 2);
    phases();
  }

  function renderTimeline() {
    if (!events.length) {
      mount(timeline, h('li.muted.empty', 'No events yet.'));
      return;
    }
    const t0 = time(events[0].time);
    mount(timeline, events.map((ev, i) => {
      const t = time(ev.time);
      const prev = i ? time(events[i - 1].time) : null;
      const snap = ev.job || {};
      const detail = [];
      if (ev.type === 'progress') {
        if (typeof snap.progress === 'number') detail.push(`${Math.round(snap.progress * 100)}%`);
        if (typeof snap.queue_position === 'number') detail.push(`queue #${snap.queue_position}`);
      }
      if (ev.type === 'submitted' && snap.remote_id) detail.push(`remote id ${snap.remote_id}`);
      if (ev.type === 'waiting' && snap.waiting_for) detail.push(snap.waiting_for);
      if (TERMINAL.has(ev.type)) {
        if (snap.reason) detail.push(snap.reason);
        if (snap.detected_by) detail.push(`detected by ${snap.detected_by}`);
        if (snap.polls !== undefined) detail.push(`${snap.polls} poll${snap.polls === 1 ? '' : 's'}`);
      }
      if (ev.rejection) detail.push(`${ev.rejection.kind}: ${ev.rejection.error}`);
      return h(`li.ev.t-${ev.type}`, { 'data-type': ev.type, 'data-seq': String(ev.seq || 0) },
        h('span.ev-dot'),
        h('div.ev-main', chip(ev.type), detail.length ? h('span.ev-detail', detail.join(' · ')) : null),
        h('div.ev-time',
          h('span', { title: fmtTime(ev.time) }, fmtClock(ev.time)),
          h('span.muted', t && t0 ? (i ? `+${fmtDur((t - prev) / 1000)}` : 'start') : '')),
        h('span.ev-seq.muted', ev.seq ? `#${ev.seq}` : ''));
    }));
  }

  // A bar of where the job's time went, from its record: waiting to be
  // submitted, queued and running at the provider, and the time Pollux
  // took to learn of the end (detection).
  function phases() {
    const el = document.getElementById('phases');
    if (!el) return;
    const j = rec;
    const t = (v) => time(v);
    if (!j || !t(j.created_at)) { mount(el); return; }
    const end = t(j.detected_at) || (TERMINAL.has(j.state) ? t(j.updated_at) : new Date());
    const marks = [
      ['pending', 'submitting', t(j.created_at), t(j.submitted_at) || (t(j.started_at) ? t(j.started_at) : null)],
      ['queued', 'queued', t(j.submitted_at), t(j.started_at) || t(j.completed_at)],
      ['running', 'running', t(j.started_at), t(j.completed_at)],
      ['detect', 'detecting', t(j.completed_at), t(j.detected_at)],
    ].filter(([, , a]) => a);
    // An open phase lasts until now (or until the job's end).
    for (const m of marks) if (!m[3]) m[3] = end;
    const t0 = t(j.created_at);
    const span = Math.max(1, end - t0);
    const segs = marks.filter(([, , a, b]) => b >= a).map(([cls, label, a, b]) => {
      const d = fmtDur((b - a) / 1000);
      const seg = h(`div.phase.s-${cls}`, { title: `${label} ${d}`, 'data-phase': cls }, (b - a) / span > 0.14 ? `${label} ${d}` : '');
      seg.style.flexGrow = String(Math.max(0.004, (b - a) / span));
      return seg;
    });
    mount(el,
      h('div.phases', segs),
      h('div.phase-scale.muted',
        h('span', fmtClock(t0)),
        h('span.phase-legend', marks.map(([cls, label, a, b]) => h('span', h(`span.dot.s-${cls}`), ` ${label} ${fmtDur((b - a) / 1000)}`))),
        h('span', TERMINAL.has(j.state) ? `${j.state} after ${fmtDur(span / 1000)}` : `${fmtDur(span / 1000)} so far`)));
  }

  async function cancel() {
    const res = await confirmDialog({
      title: 'Cancel this job?',
      body: [h('p', 'Pollux asks the provider to cancel ', h('span.mono', id), '. The provider may still finish it first; the outcome shows in the timeline.')],
      confirm: 'Cancel job',
      danger: true,
    });
    if (!res) return;
    try {
      await api.post(`/v1/jobs/${encodeURIComponent(id)}/cancel`, res.reason ? { reason: res.reason } : {});
      toast('Cancel requested', 'ok');
    } catch (err) {
      toast(`Cancel failed: ${err.message}`, 'error');
    }
  }

  // Resubmits the job as a new one and opens it. A job that reached its
  // provider has no kept input: the front door says so (409
  // input_not_kept) and the dialog asks for the input to send.
  async function resubmit() {
    let reason = '';
    let error = '';
    let input = null; // the input field, once the front door asked for it
    for (;;) {
      const res = await confirmDialog({
        title: 'Resubmit this job?',
        body: [h('p', 'Pollux submits ', h('span.mono', id), ' again as a new job: the same route, model, metadata and deadline window. Both records link to each other.')],
        confirm: 'Resubmit',
        reason,
        error,
        fields: input ? [{ name: 'input', label: 'Input (a JSON object)', el: input }] : [],
        validate: input ? (v) => { const p = parseObject(v.input); return p.error ? `input: ${p.error}` : ''; } : undefined,
      });
      if (!res) return;
      reason = res.reason;
      try {
        const a = await api.resubmit(id, reason, input ? parseObject(res.input).value : undefined);
        toast(`Resubmitted as ${a.id}`, 'ok');
        ctx.go(`#/jobs/${encodeURIComponent(a.id)}?route=${encodeURIComponent(a.route || route)}`);
        return;
      } catch (err) {
        if (err.code === 'input_not_kept' || (input && err.field === 'input')) {
          if (!input) {
            input = h('textarea.json#resubmit-input', { name: 'input', rows: 6, spellcheck: false });
            input.value = '{\n  "prompt": ""\n}';
          }
          error = err.message;
          continue;
        }
        toast(`Resubmit failed: ${err.message}`, 'error');
        return;
      }
    }
  }

  function follow() {
    if (es) es.close();
    es = api.stream(`/v1/jobs/${encodeURIComponent(id)}/events${api.query({ route })}`, TYPES, (type, ev) => {
      if (ev.seq && events.some((x) => x.seq === ev.seq && x.type === ev.type)) return;
      events.push(ev);
      // A snapshot as old as the record read is not newer: the record may
      // have changed since without an event (a resubmission's link).
      if (ev.job && (!rec || (ev.job.event_seq || 0) > (rec.event_seq || 0))) {
        rec = ev.job;
        render();
      }
      renderTimeline();
      if (TERMINAL.has(ev.state) || type === 'rejected') done();
    }, (state) => {
      if (state === 'open') { tlState.textContent = 'live'; tlState.className = 'live on'; }
      else if (state === 'closed') done();
      else if (!tlState.classList.contains('done')) { tlState.textContent = 'reconnecting'; tlState.className = 'live off'; }
    });
  }

  function done() {
    if (es) es.close();
    es = null;
    tlState.textContent = 'ended';
    tlState.className = 'live done';
  }

  try {
    rec = await api.get(`/v1/jobs/${encodeURIComponent(id)}`);
    if (rec && rec.route) route = rec.route;
    deliveries = (await api.get(`/v1/jobs/${encodeURIComponent(id)}/deliveries`)).deliveries || [];
  } catch (err) {
    if (err.status !== 404) mount(record, notice(`The record did not load: ${err.message}`, 'error'));
    if (err.status === 404 && !route) {
      mount(el, notice(`No job ${id}. If it was just submitted, open it with its route (#/jobs/${id}?route=…).`, 'error'));
      return undefined;
    }
  }
  render();
  renderTimeline();
  follow();
  return () => { if (es) es.close(); };
}

// A link to another job's page.
function jobLink(id, route) {
  return h('a.mono', { href: `#/jobs/${encodeURIComponent(id)}${route ? `?route=${encodeURIComponent(route)}` : ''}` }, id);
}

// Outputs are the provider's URLs: linked only when http(s).
function safeLink(u) {
  try {
    const url = new URL(u);
    if (url.protocol === 'https:' || url.protocol === 'http:') return h('a.mono', { href: url.href, target: '_blank', rel: 'noopener noreferrer' }, u);
  } catch { /* not a URL */ }
  return h('span.mono', u);
}
