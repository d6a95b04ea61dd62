// A model on a route: the durations Pollux learned, the poll plan it
// follows for a new job (the cold-start table's until enough is learned,
// with the learned plan shown as what comes next), and what the plan in
// force saves over fixed intervals.
import * as api from '../api.js';
import { h, mount, fmtDur, fmtNum, notice } from '../ui.js';
import { distribution } from '../charts.js';

// The quantiles as {"p50": s} from either a map ({"50": s}, {"p50": s})
// or a list ([{q: 0.5, s}], [{p: 50, seconds}]).
function quantilesOf(m) {
  const q = m.quantiles || m.quantiles_s || {};
  const out = {};
  const put = (k, v) => {
    let p = Number(String(k).replace(/^p/, ''));
    if (p > 0 && p < 1) p *= 100;
    if (Number.isFinite(p) && Number.isFinite(Number(v))) out[`p${+p.toFixed(1)}`] = Number(v);
  };
  if (Array.isArray(q)) for (const x of q) put(x.q ?? x.p ?? x.quantile, x.s ?? x.seconds ?? x.value);
  else for (const [k, v] of Object.entries(q)) put(k, v);
  return out;
}

// The histogram as [{lo, hi, count}] from [{lo, hi, count}] or
// {edges|bounds: [...], counts|weights: [...]}.
function binsOf(m) {
  const hst = m.histogram || m.hist || [];
  if (Array.isArray(hst)) {
    return hst.map((b) => ({ lo: Number(b.lo_s ?? b.lo ?? 0), hi: Number(b.hi_s ?? b.hi ?? 0), count: Number(b.share ?? b.count ?? 0) }));
  }
  const edges = hst.edges || hst.bounds || hst.edges_s || [];
  const counts = hst.counts || hst.weights || [];
  return counts.map((c, i) => ({ lo: Number(edges[i] ?? 0), hi: Number(edges[i + 1] ?? edges[i] ?? 0), count: Number(c) }));
}

function pollsOf(m, key = 'plan') {
  const p = m[key] || (key === 'plan' && m.poll_plan) || {};
  const list = Array.isArray(p) ? p : (p.polls_s || p.polls || p.times_s || p.at_s || p.offsets_s || []);
  return list.map((x) => Number(typeof x === 'object' ? (x.at_s ?? x.s ?? x.t) : x)).filter(Number.isFinite);
}

export async function model(ctx, el, route, name) {
  mount(el, h('p.muted', 'Loading…'));
  let m;
  try {
    m = await api.get(`/v1/routes/${encodeURIComponent(route)}/models/${encodeURIComponent(name)}`);
  } catch (err) {
    mount(el, crumbs(route, name), notice(err.status === 404 ? `Nothing learned yet for ${name} on ${route}: ${err.message}` : `The model did not load: ${err.message}`, 'error'));
    return;
  }
  const bins = binsOf(m).filter((b) => b.hi > b.lo);
  const q = quantilesOf(m);
  const polls = pollsOf(m);
  const coldStart = (m.plan && m.plan.source) === 'cold_start';
  // Trim the histogram to where its weight is: from the first bin with
  // weight to the last, plus a little room for the poll ticks.
  const used = bins.filter((b) => b.count > 0);
  const hi = used.length ? used[used.length - 1].hi : Math.max(...polls.slice(0, 12), 1);
  const lo = used.length ? used[0].lo : 0;
  const shown = bins.filter((b) => b.hi > lo && b.lo < hi * 1.0001);
  const total = shown.reduce((a, b) => a + b.count, 0);
  let acc = 0;
  const cdf = total ? [[shown[0].lo, 0], ...shown.map((b) => { acc += b.count; return [b.hi, acc / total]; })] : [];
  const keyQ = Object.fromEntries(['p50', 'p90', 'p99'].filter((k) => k in q).map((k) => [k, q[k]]));
  const shares = bins.some((b) => b.count > 0 && b.count < 1);
  const chart = distribution({ bins: shown, cdf, polls, quantiles: keyQ }, { label: `durations of ${name}`, fmtCount: shares ? (c) => `${(c * 100).toFixed(c < 0.1 ? 1 : 0)}%` : String });
  const cmp = m.comparison || m.compare || m.cost || {};
  const rowsOf = [
    ['Pollux', cmp.pollux, coldStart ? 'the cold-start table (in force now)' : 'its learned schedule (this plan)'],
    ['Fixed interval', cmp.fixed || cmp.fixed_interval, (cmp.fixed || cmp.fixed_interval || {}).interval_s ? `every ${fmtDur((cmp.fixed || cmp.fixed_interval).interval_s)}: the same mean delay` : 'the same mean detection delay'],
    ['SDK default', cmp.sdk || cmp.sdk_default, (cmp.sdk || cmp.sdk_default || {}).interval_s ? `every ${fmtDur((cmp.sdk || cmp.sdk_default).interval_s)}` : 'the provider SDK’s poll loop'],
  ].filter((r) => r[1]);
  const base = cmp.pollux && (cmp.pollux.polls_per_job ?? cmp.pollux.polls);
  const table = rowsOf.length ? h('table.grid.compare#compare',
    h('thead', h('tr', h('th', 'Poller'), h('th.num', 'Polls / job'), h('th.num', 'Mean detection delay'), h('th.num', 'Pollux saves'), h('th', ''))),
    h('tbody', rowsOf.map(([label, r, note]) => {
      const polls = r.polls_per_job ?? r.polls;
      const delay = r.mean_delay_s ?? r.mean_detection_delay_s ?? r.delay_s;
      // Where the plan in force polls more than the other poller (the
      // cold-start table can), say so plainly rather than "0.2× fewer".
      const ratio = label !== 'Pollux' && base && polls ? polls / base : 0;
      const saves = !ratio ? '' : ratio >= 1 ? `${fmtNum(ratio, 1)}× fewer polls` : `${fmtNum(1 / ratio, 1)}× more polls`;
      return h(`tr${label === 'Pollux' ? '.ours' : ''}`, h('th', label), h('td.num', fmtNum(polls, 1)), h('td.num', fmtDur(delay)),
        h(ratio && ratio < 1 ? 'td.num.costlier' : 'td.num.saving', saves), h('td.muted', note));
    }))) : notice('No comparison yet: it needs a learned distribution.');

  const samples = m.samples;
  const learned = m.learned !== false && bins.length > 0;
  const next = m.learned_plan;
  const nextPolls = pollsOf(m, 'learned_plan');
  mount(el,
    crumbs(route, name),
    h('div.page-head', h('h1', h('span.mono', name)), h('span.muted', `on ${route}`), h('div.spacer'),
      h('a.btn.small', { href: `#/jobs?route=${encodeURIComponent(route)}&model=${encodeURIComponent(name)}` }, 'Its jobs')),
    h('div.stats-row',
      ['p5', 'p25', 'p50', 'p75', 'p90', 'p95', 'p99'].filter((k) => k in q).map((k) => h('div.stat', h('div.stat-label', k), h('div.stat-value', fmtDur(q[k])))),
      samples !== undefined ? h('div.stat', { title: 'Effective sample count: recent jobs weigh most' }, h('div.stat-label', 'Samples'), h('div.stat-value', fmtNum(samples, 1)), m.observed !== undefined ? h('div.stat-sub', `${fmtNum(m.observed)} ${m.observed === 1 ? 'job' : 'jobs'} observed`) : null) : null,
      h(`div.stat${learned ? '' : '.warn'}`, h('div.stat-label', 'Schedule'), h('div.stat-value', learned ? 'learned' : 'cold start'), h('div.stat-sub', learned ? 'follows this plan' : `learns after ${fmtNum(m.min_samples || 0)} samples`))),
    h('section.card',
      h('div.card-head', h('h2', 'Durations and the poll plan'), h('div.spacer'),
        h('span.legend-inline', h('span.key.hist'), shares ? 'share of jobs per bin' : 'jobs per bin', h('span.key.cdf'), 'share done by then (CDF)', h('span.key.poll'), `polls of a new job (${polls.length})`)),
      bins.length ? chart : notice('No durations learned yet for this model: the plan below is the route’s default.'),
      polls.length ? h('p.muted.small.plan-times', coldStart ? 'Cold-start polls after submit (a job without an expected duration): ' : 'Poll times after submit: ', polls.slice(0, 24).map(fmtDur).join(', '), polls.length > 24 ? ` … (${polls.length} in all)` : '') : null,
      m.plan && m.plan.expected_polls ? h('p.small#plan-in-force', `${coldStart ? 'In force now, the cold-start table' : 'The plan'} expects ${fmtNum(m.plan.expected_polls, 1)} polls per job and detects a completion ${fmtDur(m.plan.mean_delay_s)} after it on average.`) : null,
      next && next.expected_polls ? h('p.small.muted#plan-learned', `After ${fmtNum(m.min_samples || 0)} samples (${fmtNum(samples || 0, 1)} so far), the learned plan takes over: polls at ${nextPolls.slice(0, 8).map(fmtDur).join(', ')}${nextPolls.length > 8 ? ' …' : ''}; ${fmtNum(next.expected_polls, 1)} polls per job, a completion found ${fmtDur(next.mean_delay_s)} after it on average.`) : null),
    h('section.card', h('div.card-head', h('h2', 'Polls per job: Pollux vs a fixed interval vs the SDK default')), table));
}

function crumbs(route, name) {
  return h('nav.crumbs', h('a', { href: '#/' }, 'Routes'), ' / ', h('a', { href: `#/jobs?route=${encodeURIComponent(route)}` }, route), ' / ', h('span.mono', name));
}
