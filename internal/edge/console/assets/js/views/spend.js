// Spend: what each app the session may see spent, a bar a day against
// its day budget, its month against its month budget, and what each route
// and model cost over the days shown — the page an operator shows the
// finance team. An app's token sees its own app only (the API decides).
import * as api from '../api.js';
import { h, mount, fmtNum, notice } from '../ui.js';
import { dayBars } from '../charts.js';

const DAYS = 30;

/** The dates of the days days up to today (UTC), oldest first. */
function lastDays(days, now = new Date()) {
  const out = [];
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  for (let i = days - 1; i >= 0; i--) out.push(new Date(today - i * 86400000).toISOString().slice(0, 10));
  return out;
}

const money = (v) => fmtNum(Number(v) || 0, 2);

function share(spent, budget) {
  if (!(budget > 0)) return null;
  const p = spent / budget;
  return h(`span.${p >= 1 ? 'over' : p >= 0.8 ? 'near' : 'ok'}`, ` (${Math.round(p * 100)} %)`);
}

function appCard(a, dates) {
  const byDate = new Map((a.days || []).map((d) => [d.date, d]));
  const values = dates.map((d) => (byDate.get(d) ? Number(byDate.get(d).spent) || 0 : 0));
  const budget = a.budget || {};
  const total = values.reduce((x, y) => x + y, 0);
  const lines = new Map();
  for (const d of a.days || []) {
    for (const l of d.by || []) {
      const k = `${l.route}\u0000${l.model}`;
      const cur = lines.get(k) || { route: l.route, model: l.model, cost: 0, jobs: 0 };
      cur.cost += Number(l.cost) || 0;
      cur.jobs += Number(l.jobs) || 0;
      lines.set(k, cur);
    }
  }
  const rows = [...lines.values()].sort((x, y) => y.cost - x.cost);
  const name = a.app || '(no app)';
  const today = values[values.length - 1];
  return h('section.card.spend-app', { 'data-app': a.app || '' },
    h('div.card-head', h('h2.mono', name)),
    h('div.spend-figures',
      h('span', 'today ', h('b.today', money(today)), budget.day ? [' of ', h('b', money(budget.day)), share(today, budget.day)] : null),
      h('span', 'this month ', h('b.month', money(a.month)), budget.month ? [' of ', h('b', money(budget.month)), share(a.month, budget.month)] : null),
      h('span', `last ${dates.length} days `, h('b.total', money(total)))),
    dayBars(values, dates, { budget: budget.day, fmt: money, label: `${name}: spend per day` }),
    rows.length ? h('table.grid.spend-lines',
      h('thead', h('tr', h('th', 'Route'), h('th', 'Model'), h('th.num', 'Jobs ended'), h('th.num', 'Cost'))),
      h('tbody', rows.map((r) => h('tr', h('td', r.route), h('td.mono', r.model), h('td.num', fmtNum(r.jobs)), h('td.num', money(r.cost))))))
      : h('p.muted.small', 'No job of this app has ended in these days.'));
}

const REFRESH_MS = 5000;

export async function spendView(ctx, el) {
  const head = h('div.page-head', h('h1', 'Spend'), h('div.spacer'),
    h('span.muted.small', `last ${DAYS} days, UTC; a day counts its ended jobs' costs and the estimates of jobs under way`));
  const body = h('div.spend', h('p.muted.pad', 'Loading…'));
  mount(el, head, body);
  let timer = 0;
  async function load() {
    try {
      const res = await api.get(`/v1/spend?days=${DAYS}`);
      const apps = (res && res.apps) || [];
      const dates = lastDays(DAYS);
      mount(body, apps.length ? apps.map((a) => appCard(a, dates))
        : notice('Nothing is spent yet: no route prices its jobs (routes.<name>.prices), or no priced job was admitted.'));
    } catch (err) {
      mount(body, notice(`The spend did not load: ${err.message}`, 'error'));
    }
    timer = setTimeout(load, REFRESH_MS);
  }
  await load();
  return () => clearTimeout(timer);
}
