// The overview: every route, its state, its capacity and its last hour.
import * as api from '../api.js';
import { h, mount, chip, when, fmtDur, fmtNum, fmtPct, fmtClock, fmtTime, fmtNear, toast, confirmDialog, notice, STATES, time } from '../ui.js';
import { sparkline, stack } from '../charts.js';

const REFRESH_MS = 5000;

/** GET /v1/routes: {routes, levels, activity}. */
export async function loadFleet() {
  const body = await api.get('/v1/routes');
  const list = Array.isArray(body) ? body : (body && body.routes) || [];
  return {
    routes: list.map((r) => ({ ...r, name: r.name || r.route })),
    levels: (body && body.levels) || [],
    activity: body && body.activity,
  };
}

/** The routes as /v1/routes lists them. */
export async function loadRoutes() {
  return (await loadFleet()).routes;
}

export function paused(r) {
  return r.state === 'paused' || pausesOf(r).length > 0;
}

/** Every pause in force on the route, the operator's first. */
function pausesOf(r) {
  const list = r.pauses || (r.pause ? [r.pause] : []);
  return list.filter(Boolean);
}

/** The operator's pause in force, if any: the one resume ends. */
function operatorPause(r) {
  return pausesOf(r).find((p) => p.kind === 'operator') || null;
}

export async function overview(ctx, el) {
  const body = h('div.routes');
  const stamp = h('span.muted.small#refreshed');
  const summary = h('div.summary');
  let timer = 0;
  let live = true;
  const toggle = h('button.btn.small', { type: 'button', on: { click: () => { live = !live; toggle.textContent = live ? 'Pause refresh' : 'Resume refresh'; if (live) load(); } } }, 'Pause refresh');

  const modelsCard = h('section.card.models#models');
  mount(el,
    h('div.page-head', h('h1', 'Routes'), h('div.spacer'), stamp, toggle),
    summary,
    body,
    modelsCard);

  // The models each route has seen, with what Pollux learned of them:
  // refreshed less often than the routes, they change slowly.
  let models = 0;
  async function loadModels() {
    try {
      const res = await api.get('/v1/models');
      mount(modelsCard, modelsTable((res && res.models) || []));
    } catch {
      mount(modelsCard);
    }
  }

  async function load() {
    clearTimeout(timer);
    try {
      const { routes, levels, activity } = await loadFleet();
      mount(summary, fleet(routes, activity));
      mount(body, routes.length ? routes.map((r) => card(ctx, r, load)) : notice('No routes are configured.'), levelsCard(levels));
      stamp.textContent = `updated ${fmtClock(new Date())}`;
    } catch (err) {
      mount(body, notice(`The routes did not load: ${err.message}`, 'error'));
    }
    if (live) timer = setTimeout(load, REFRESH_MS);
    if (models++ % 6 === 0) loadModels();
  }
  await load();
  return () => clearTimeout(timer);
}

function modelsTable(list) {
  if (!list.length) return [];
  return [
    h('div.card-head', h('h2', 'Models'), h('span.muted.small', 'durations learned from finished jobs; a model’s page shows its poll plan and what it saves')),
    h('table.grid',
      h('thead', h('tr', h('th', 'Model'), h('th', 'Route'), h('th', 'Schedule'), h('th.num', 'Samples'), h('th.num', 'p50'), h('th.num', 'p90'), h('th', ''))),
      h('tbody', list.map((m) => {
        const href = `#/models/${encodeURIComponent(m.route)}/${encodeURIComponent(m.model)}`;
        return h('tr',
          h('td', h('a.mono', { href }, m.model)),
          h('td', m.route),
          h('td', m.learned ? h('span.chip.s-succeeded', 'learned') : h('span.chip.s-pending', m.samples ? 'learning' : 'cold start')),
          h('td.num', m.samples ? fmtNum(m.samples, 1) : '—'),
          h('td.num', m.p50_s ? fmtDur(m.p50_s) : '—'),
          h('td.num', m.p90_s ? fmtDur(m.p90_s) : '—'),
          h('td', h('a', { href: `#/jobs?route=${encodeURIComponent(m.route)}&model=${encodeURIComponent(m.model)}` }, 'jobs')));
      }))),
  ];
}

// The fleet's figures: the routes' sums, and the last hour of them all as
// the API counts it (state.Tally, as `pollux stats`): the page derives no
// figure of its own. Without an index the API has no activity, for the
// fleet or a route, and the hour's figures are blank.
function fleet(routes, all) {
  const sum = (f) => routes.reduce((a, r) => a + (Number(f(r)) || 0), 0);
  const a = all || {};
  const done = a.completions > 0;
  const pollOnly = routes.length > 0 && routes.every((r) => r.webhooks === false);
  const pausedN = routes.filter(paused).length;
  return [
    stat('Routes', `${routes.length}`, pausedN ? `${pausedN} paused` : 'all running', pausedN ? 'warn' : ''),
    stat('Tracked', fmtNum(sum((r) => r.tracked)), sum((r) => r.parked) ? `jobs at providers, ${fmtNum(sum((r) => r.parked))} parked` : 'jobs at providers'),
    stat('Backlog', fmtNum(sum((r) => r.backlog) + sum((r) => r.intake)), 'checks + intake waiting'),
    stat('Completions', fmtNum(a.completions || 0), a.ended > a.completions ? `last hour; ${fmtNum(a.ended - a.completions)} more ended` : 'last hour'),
    stat('Polls / completion', done ? fmtNum(a.polls_per_completion, 2) : '—', 'last hour'),
    stat('Detection p50 / p95', done ? `${fmtDur(a.detect_p50)} / ${fmtDur(a.detect_p95)}` : '—', 'completion → Pollux knows'),
    coverageStat(stat, a, pollOnly, 'first seen by webhook'),
  ];
}

// The shared budget levels: leases and running slots of accounts, the
// global level and routes that cap running jobs.
function levelsCard(levels) {
  if (!levels || !levels.length) return null;
  const cap = (l) => (l ? `${fmtNum(l.out)} / ${l.cap ? fmtNum(l.cap) : '∞'}` : '—');
  const kinds = [...new Set(levels.flatMap((l) => Object.keys(l.leases || {})))].sort();
  return h('section.card.levels',
    h('div.card-head', h('h2', 'Budget levels'), h('span.muted.small', 'leases and running slots in use / cap, shared by the routes under each level')),
    h('table.grid',
      h('thead', h('tr', h('th', 'Level'), h('th.num', 'Running slots'), h('th.num', 'Configured'), kinds.map((k) => h('th.num', `${k} leases`)))),
      h('tbody', levels.map((l) => h('tr',
        h('td.mono', l.level),
        h('td.num', cap(l.running)),
        h('td.num', l.running_configured > 0 ? fmtNum(l.running_configured) : '—'),
        kinds.map((k) => h('td.num', cap((l.leases || {})[k]))))))));
}

// Webhook coverage, unless no route asks for webhooks: then it is not a
// figure to watch, and the place says poll-only.
function coverageStat(make, a, pollOnly, sub) {
  if (pollOnly) return make('Webhook coverage', 'poll-only', 'no webhooks asked for', 'muted');
  return make('Webhook coverage', a.webhook_expected ? fmtPct(a.webhook_coverage) : '—', a.webhook_expected ? sub : 'no webhook expected yet');
}

function stat(label, value, sub, cls = '') {
  return h(`div.stat${cls ? `.${cls}` : ''}`, h('div.stat-label', label), h('div.stat-value', value), sub ? h('div.stat-sub', sub) : null);
}

function card(ctx, r, reload) {
  const a = r.activity || {};
  const minutes = a.minutes || [];
  const isPaused = paused(r);
  const op = operatorPause(r);
  const counts = r.counts || {};
  // Pending jobs held while the route is paused, or waiting for slots.
  const waiting = Object.entries(r.waiting || {}).sort((a, b) => b[1] - a[1]);
  const jobsHref = (st) => `#/jobs?route=${encodeURIComponent(r.name)}${st ? `&state=${st}` : ''}`;
  const times = minutes.map((m) => fmtClock(m.start).slice(0, 5));

  const pauseLines = pausesOf(r).map((p) => h('div.pause-line', { 'data-kind': p.kind },
    h('strong', p.kind === 'operator' ? `Paused by ${p.by || 'an operator'}` : `Held back by the provider${p.cause ? ` (${p.cause.replace(/_/g, ' ')})` : ''}`),
    time(p.until) ? [' until ', h('span', { title: fmtTime(p.until) }, fmtNear(p.until)), ' (', when(p.until), ')'] : (p.kind === 'operator' ? ' until resumed' : ''),
    time(p.since) ? h('span.muted', ' · since ', when(p.since)) : null,
    p.reason ? [' — ', h('q', p.reason)] : null));

  const action = op
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
    pauseLines,
    h('div.route-body',
      h('div.metrics',
        metric('Tracked', fmtNum(r.tracked), r.parked ? `jobs with a check, ${fmtNum(r.parked)} parked` : 'jobs with a check'),
        metric('Backlog', fmtNum(r.backlog), 'checks not yet taken'),
        metric('Intake', fmtNum(r.intake), 'messages waiting'),
        waiting.length ? metric('Waiting to start', h('span', waiting.map(([why, n]) => h('div', `${fmtNum(n)} ${why}`))), 'pending jobs, and why', 'lines') : null,
        metric('Oldest unresolved', r.oldest_s ? fmtDur(r.oldest_s) : '—', 'at the provider'),
        metric('Polls / completion', a.completions ? fmtNum(a.polls_per_completion, 2) : '—', 'last hour'),
        metric('Detection p50 / p95', a.completions ? `${fmtDur(a.detect_p50)} / ${fmtDur(a.detect_p95)}` : '—', 'last hour'),
        coverageStat(metric, a, r.webhooks === false, 'of completions'),
        metric('Running slots', running.text, running.sub),
        leases.length ? metric('Leases in use / cap', h('span', leases.map(([k, l]) => h('div', `${k} ${fmtNum(l.out)} / ${l.cap ? fmtNum(l.cap) : '∞'}`))), '', 'lines') : null),
      h('div.charts',
        chart('Ended / min', `${fmtNum(a.completions || 0)} ${a.completions === 1 ? 'completion' : 'completions'} in the hour${a.ended > a.completions ? `, ${fmtNum(a.ended - a.completions)} more ended` : ''}`, sparkline([
          { values: minutes.map((m) => m.ended ?? m.completions), kind: 'bar', cls: 'bar' },
          { values: minutes.map((m) => m.failures), kind: 'bar', cls: 'bar fail' },
        ], { label: `jobs ended per minute on ${r.name} (failed, expired or lost in red)`, times }), peakOf(minutes.map((m) => m.ended ?? m.completions))),
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
      time(e.until) ? [' until ', fmtNear(e.until)] : null))) : null);
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
  return h(`figure.chart${peak ? '' : '.chart-empty'}`, h('figcaption', h('span', title), sub ? h('span.muted', { title: sub }, sub) : null), svg,
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
    body: h('p', 'Held-back checks and submissions start again within half a minute, within the route’s budget. A pause the provider imposed (a rate limit) stays in force.'),
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
