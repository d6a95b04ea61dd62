// The overview: every route, its state, its capacity and its last hour.
import * as api from '../api.js';
import { h, mount, chip, when, fmtDur, fmtNum, fmtPct, fmtClock, toast, confirmDialog, notice, STATES, time } from '../ui.js';
import { sparkline, stack } from '../charts.js';

const REFRESH_MS = 5000;

/** The routes as /v1/routes lists them ({routes: [...]} or [...]). */
export async function loadRoutes() {
  const body = await api.get('/v1/routes');
  const list = Array.isArray(body) ? body : (body && body.routes) || [];
  return list.map((r) => ({ ...r, name: r.name || r.route }));
}

export function paused(r) {
  return r.state === 'paused' || !!(r.pause && (r.pause.kind || r.pause.until));
}

export async function overview(ctx, el) {
  const body = h('div.routes');
  const stamp = h('span.muted.small#refreshed');
  const summary = h('div.summary');
  let timer = 0;
  let live = true;
  const toggle = h('button.btn.small', { type: 'button', on: { click: () => { live = !live; toggle.textContent = live ? 'Pause refresh' : 'Resume refresh'; if (live) load(); } } }, 'Pause refresh');

  mount(el,
    h('div.page-head', h('h1', 'Routes'), h('div.spacer'), stamp, toggle),
    summary,
    body);

  async function load() {
    clearTimeout(timer);
    try {
      const routes = await loadRoutes();
      mount(summary, fleet(routes));
      mount(body, routes.length ? routes.map((r) => card(ctx, r, load)) : notice('No routes are configured.'));
      stamp.textContent = `updated ${fmtClock(new Date())}`;
    } catch (err) {
      mount(body, notice(`The routes did not load: ${err.message}`, 'error'));
    }
    if (live) timer = setTimeout(load, REFRESH_MS);
  }
  await load();
  return () => clearTimeout(timer);
}

// The fleet's figures over every route.
function fleet(routes) {
  const sum = (f) => routes.reduce((a, r) => a + (Number(f(r)) || 0), 0);
  const completions = sum((r) => r.activity && r.activity.completions);
  const weighted = (f) => (completions ? sum((r) => (Number(f(r.activity || {})) || 0) * ((r.activity && r.activity.completions) || 0)) / completions : null);
  const pausedN = routes.filter(paused).length;
  return [
    stat('Routes', `${routes.length}`, pausedN ? `${pausedN} paused` : 'all running', pausedN ? 'warn' : ''),
    stat('Tracked', fmtNum(sum((r) => r.tracked)), 'jobs at providers'),
    stat('Backlog', fmtNum(sum((r) => r.backlog) + sum((r) => r.intake)), 'checks + intake waiting'),
    stat('Completions', fmtNum(completions), 'last hour'),
    stat('Polls / completion', completions ? fmtNum(weighted((a) => a.polls_per_completion), 2) : '—', 'last hour'),
    stat('Detection p50 / p95', completions ? `${fmtDur(weighted((a) => a.detect_p50))} / ${fmtDur(weighted((a) => a.detect_p95))}` : '—', 'completion → Pollux knows'),
    stat('Webhook coverage', completions ? fmtPct(weighted((a) => a.webhook_coverage)) : '—', 'completions seen by webhook'),
  ];
}

function stat(label, value, sub, cls = '') {
  return h(`div.stat${cls ? `.${cls}` : ''}`, h('div.stat-label', label), h('div.stat-value', value), sub ? h('div.stat-sub', sub) : null);
}

function card(ctx, r, reload) {
  const a = r.activity || {};
  const minutes = a.minutes || [];
  const isPaused = paused(r);
  const p = r.pause || r.operator_pause || null;
  const counts = r.counts || {};
  const jobsHref = (st) => `#/jobs?route=${encodeURIComponent(r.name)}${st ? `&state=${st}` : ''}`;
  const times = minutes.map((m) => fmtClock(m.start).slice(0, 5));

  const pauseLine = isPaused && p ? h('div.pause-line',
    h('strong', p.kind === 'operator' ? `Paused by ${p.by || 'an operator'}` : `Paused by the provider (${p.kind || 'pause'})`),
    time(p.until) ? [' until ', h('span', { title: String(p.until) }, fmtClock(p.until).slice(0, 8)), ' (', when(p.until), ')'] : ' until resumed',
    p.reason ? [' — ', h('q', p.reason)] : null) : null;

  const action = isPaused
    ? h('button.btn.act', { type: 'button', 'data-action': 'resume', disabled: !ctx.canAct(), title: ctx.canAct() ? 'Resume the route' : ctx.readOnlyWhy, on: { click: () => resume(r, reload) } }, 'Resume')
    : h('button.btn.act.warn', { type: 'button', 'data-action': 'pause', disabled: !ctx.canAct(), title: ctx.canAct() ? 'Stop starting jobs on this route' : ctx.readOnlyWhy, on: { click: () => pause(r, reload) } }, 'Pause');

  const leases = Object.entries(r.leases || {});
  const running = runningSlots(r);
  const evs = (r.events || r.route_events || []).slice(-4).reverse();

  return h(`section.card.route${isPaused ? '.is-paused' : ''}`, { 'data-route': r.name },
    h('div.card-head',
      h('h2', h('a', { href: jobsHref('') }, r.name)),
      chip(isPaused ? 'paused' : 'running'),
      h('div.spacer'),
      h('a.btn.small', { href: jobsHref('') }, 'Jobs'),
      action),
    pauseLine,
    h('div.route-body',
      h('div.metrics',
        metric('Tracked', fmtNum(r.tracked), 'jobs with a check'),
        metric('Backlog', fmtNum(r.backlog), 'checks not yet taken'),
        metric('Intake', fmtNum(r.intake), 'messages waiting'),
        metric('Oldest unresolved', r.oldest_s ? fmtDur(r.oldest_s) : '—', 'at the provider'),
        metric('Polls / completion', a.completions ? fmtNum(a.polls_per_completion, 2) : '—', 'last hour'),
        metric('Detection p50 / p95', a.completions ? `${fmtDur(a.detect_p50)} / ${fmtDur(a.detect_p95)}` : '—', 'last hour'),
        metric('Webhook coverage', a.completions ? fmtPct(a.webhook_coverage) : '—', 'of completions'),
        metric('Running slots', running.text, running.sub),
        leases.length ? metric('Leases in use / cap', h('span', leases.map(([k, l]) => h('div', `${k} ${fmtNum(l.out)} / ${l.cap ? fmtNum(l.cap) : '∞'}`))), '', 'lines') : null),
      h('div.charts',
        chart('Completions / min', `${fmtNum(a.completions || 0)} in the hour`, sparkline([
          { values: minutes.map((m) => m.completions), kind: 'bar', cls: 'bar' },
          { values: minutes.map((m) => m.failures), kind: 'bar', cls: 'bar fail' },
        ], { label: `completions per minute on ${r.name}`, times }), peakOf(minutes.map((m) => m.completions))),
        chart('Detection delay', 'p50 ─ p95 ┄', sparkline([
          { values: minutes.map((m) => m.detect_p95), kind: 'line', cls: 'line p95', gaps: true },
          { values: minutes.map((m) => m.detect_p50), kind: 'line', cls: 'line', gaps: true },
        ], { label: `detection delay on ${r.name}` }), peakOf(minutes.map((m) => m.detect_p95), fmtDur)),
        chart('Polls / min', `${fmtNum(minutes.reduce((a, m) => a + (m.polls || 0), 0))} in the hour`, sparkline([{ values: minutes.map((m) => m.polls), kind: 'bar', cls: 'bar poll' }], { label: `polls per minute on ${r.name}`, times }), peakOf(minutes.map((m) => m.polls))))),
    h('div.counts',
      stack(counts, STATES, jobsHref),
      h('div.legend', STATES.filter((s) => counts[s]).map((s) => h('a.legend-item', { href: jobsHref(s) }, h(`span.dot.s-${s}`), s, ' ', h('b', fmtNum(counts[s])))),
        Object.keys(counts).length ? null : h('span.muted', 'no jobs in the index yet'))),
    evs.length ? h('ul.route-events', evs.map((e) => h('li',
      h('span.muted', fmtClock(e.time).slice(0, 8)), ' ', chip(e.type), ' by ', h('b', e.by || '?'),
      e.reason ? [' — ', h('q', e.reason)] : null,
      time(e.until) ? [' until ', fmtClock(e.until).slice(0, 8)] : null))) : null);
}

function runningSlots(r) {
  const run = r.running || r.running_slots;
  if (run && typeof run === 'object' && !Array.isArray(run) && 'out' in run) {
    return { text: `${fmtNum(run.out)} / ${run.cap ? fmtNum(run.cap) : '∞'}`, sub: 'in use / cap' };
  }
  const levels = r.levels || (Array.isArray(run) ? run : []);
  const withRun = levels.filter((l) => l && l.running);
  if (withRun.length) {
    return { text: withRun.map((l) => `${fmtNum(l.running.out)}/${l.running.cap ? fmtNum(l.running.cap) : '∞'}`).join(' · '), sub: withRun.map((l) => l.level).join(' · ') };
  }
  return { text: '—', sub: 'no running cap' };
}

function metric(label, value, sub, cls = '') {
  return h('div.metric', h('div.metric-label', label), h(`div.metric-value${cls ? `.${cls}` : ''}`, value), sub ? h('div.metric-sub', sub) : null);
}

// A sparkline with its title, its peak and its time span under it.
function chart(title, sub, svg, peak) {
  return h('figure.chart', h('figcaption', h('span', title), sub ? h('span.muted', sub) : null), svg,
    h('div.chart-scale', h('span', '60 min ago'), h('span', peak ? `peak ${peak}` : ''), h('span', 'now')));
}

function peakOf(values, fmt = fmtNum) {
  const p = Math.max(0, ...values.filter(Number.isFinite));
  return p ? fmt(p) : '';
}

async function pause(r, reload) {
  const dur = h('select', { name: 'for' },
    ['15m', '30m', '1h', '4h', '24h'].map((d) => h('option', { value: d, selected: d === '30m' }, d)),
    h('option', { value: '' }, 'until resumed'));
  const res = await confirmDialog({
    title: `Pause route ${r.name}?`,
    body: [h('p', 'No new job starts and no check polls on this route until it is resumed or the pause ends. Jobs already at the provider keep running there; webhooks are still received.'),
      h('p.muted', 'Every Pollux process of the fleet honours the pause.')],
    fields: [{ name: 'for', label: 'For', el: dur }],
    confirm: 'Pause route',
    danger: true,
    reasonRequired: true,
  });
  if (!res) return;
  const body = { reason: res.reason };
  if (res.for) body.for = res.for;
  try {
    await api.post(`/v1/routes/${encodeURIComponent(r.name)}/pause`, body);
    toast(`Route ${r.name} paused`, 'ok');
  } catch (err) {
    toast(`Pause failed: ${err.message}`, 'error');
  }
  reload();
}

async function resume(r, reload) {
  const res = await confirmDialog({
    title: `Resume route ${r.name}?`,
    body: h('p', 'Checks and new jobs start again at once, within the route’s budget.'),
    confirm: 'Resume route',
  });
  if (!res) return;
  try {
    await api.post(`/v1/routes/${encodeURIComponent(r.name)}/resume`, res.reason ? { reason: res.reason } : {});
    toast(`Route ${r.name} resumed`, 'ok');
  } catch (err) {
    toast(`Resume failed: ${err.message}`, 'error');
  }
  reload();
}
