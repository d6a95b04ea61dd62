// The jobs: a filtered list, newest first, paged by cursor and kept live
// by /v1/stream.
import * as api from '../api.js';
import { h, mount, mountAfter, chip, mono, when, fmtNum, notice, STATES, TERMINAL, time } from '../ui.js';
import { loadRoutes } from './overview.js';
import { bulkAction, showResult } from './bulk.js';

const LIMIT = 50;
const AGES = [['', 'any time'], ['15m', 'last 15 min'], ['1h', 'last hour'], ['6h', 'last 6 hours'], ['24h', 'last 24 hours'], ['168h', 'last 7 days']];

function seconds(d) {
  const m = /^(\d+)([mh])$/.exec(d || '');
  return m ? Number(m[1]) * (m[2] === 'h' ? 3600 : 60) : 0;
}

/** The filters a #/jobs link names. */
function filtersOf(params) {
  return {
    route: params.get('route') || '',
    states: (params.get('state') || '').split(',').filter((s) => STATES.includes(s)),
    model: params.get('model') || '',
    age: params.get('age') || '',
    q: params.get('q') || '',
  };
}

function hashOf(f) {
  return `#/jobs${api.query({ route: f.route, state: f.states, model: f.model, age: f.age, q: f.q })}`;
}

/** Whether an entry matches the filters (for entries the stream brings). */
function matches(f, e, createdAfter) {
  if (f.route && e.route !== f.route) return false;
  if (f.states.length && !f.states.includes(e.state)) return false;
  if (f.model && e.model !== f.model) return false;
  if (createdAfter && time(e.created_at) && time(e.created_at) < createdAfter) return false;
  if (f.q && ![e.id, e.idempotency_key, e.remote_id].includes(f.q)) return false;
  return true;
}

export async function jobs(ctx, el) {
  const f = filtersOf(ctx.params);
  const cursors = []; // the cursors of the pages before this one
  let cursor = '';
  let page = null;
  let es = null;
  const rows = new Map(); // id → {e, tr}
  const can = ctx.canAct();
  const selected = new Set(); // the ids ticked, of jobs on this page

  // Filter bar.
  const routeSel = h('select#f-route', { name: 'route', 'aria-label': 'Route' }, h('option', { value: '' }, 'all routes'));
  const modelIn = h('input#f-model', { name: 'model', list: 'models', placeholder: 'any model', 'aria-label': 'Model', value: f.model, spellcheck: false });
  const models = h('datalist#models');
  const ageSel = h('select#f-age', { name: 'age', 'aria-label': 'Created' }, AGES.map(([v, l]) => h('option', { value: v, selected: v === f.age }, l)));
  const search = h('input#f-search', { type: 'search', name: 'q', placeholder: 'exact job id, idempotency key or remote id (press /)', value: f.q, spellcheck: false, 'aria-label': 'Search' });
  const stateBtns = STATES.map((s) => h(`button.chip-toggle.s-${s}`, {
    type: 'button', 'data-state': s, 'aria-pressed': String(f.states.includes(s)),
    on: { click: () => { f.states = f.states.includes(s) ? f.states.filter((x) => x !== s) : [...f.states, s]; apply(); } },
  }, s, h('span.count', { title: 'jobs in this state now that match the other filters' })));
  const clear = h('button.btn.link#f-clear', { type: 'button', on: { click: () => { Object.assign(f, { route: '', states: [], model: '', age: '', q: '' }); apply(true); } } }, 'clear');
  const form = h('form.filters', { on: { submit: (ev) => { ev.preventDefault(); apply(); } } },
    h('div.filter-row',
      h('label.inline', 'Route', routeSel),
      h('label.inline', 'Model', modelIn, models),
      h('label.inline', 'Created', ageSel),
      h('label.inline.grow', 'Search', search),
      h('button.btn.primary', { type: 'submit' }, 'Filter'),
      clear),
    h('div.filter-row.states', h('span.label', 'State'), stateBtns));
  routeSel.addEventListener('change', () => { f.route = routeSel.value; apply(); });
  ageSel.addEventListener('change', () => { f.age = ageSel.value; apply(); });
  modelIn.addEventListener('change', () => { f.model = modelIn.value.trim(); apply(); });

  const liveDot = h('span.live#live', { title: 'Live updates from /v1/stream' }, 'connecting');
  const total = h('span.total#total');
  const tbody = h('tbody#job-rows');
  const selAll = can ? h('input#sel-all', { type: 'checkbox', 'aria-label': 'Select every job on this page', on: { change: () => selectAll(selAll.checked) } }) : null;
  const table = h('table.grid.jobs',
    h('thead', h('tr',
      can ? h('th.sel', selAll) : null,
      h('th', 'Job'), h('th', 'State'), h('th', 'Route'), h('th', 'Model'), h('th.num', 'Progress'),
      h('th.num', 'Polls'), h('th', 'Created'), h('th', 'Updated'), h('th', 'Remote id'), h('th', 'Note'))),
    tbody);
  const prev = h('button.btn#prev', { type: 'button', on: { click: () => { cursor = cursors.pop() || ''; load(); } } }, '← Newer');
  const next = h('button.btn#next', { type: 'button', on: { click: () => { cursors.push(cursor); cursor = page.next; load(); } } }, 'Older →');
  const pageInfo = h('span.muted#page-info');
  const status = h('div#jobs-status');

  // Acting on jobs: on the ones ticked, or on every one the filters match.
  const result = h('div#bulk-slot');
  const selInfo = h('span.sel-info#sel-info');
  const bulkBtn = (id, action, cls) => h(`button.btn.small${cls}#${id}`, { type: 'button', on: { click: () => act(action, id.endsWith('matching')) } });
  const cancelSel = bulkBtn('bulk-cancel', 'cancel', '.danger');
  const resubmitSel = bulkBtn('bulk-resubmit', 'resubmit', '');
  const clearSel = h('button.btn.link.small#sel-clear', { type: 'button', on: { click: () => selectAll(false) } }, 'clear selection');
  const cancelAll = bulkBtn('bulk-cancel-matching', 'cancel', '.danger');
  const resubmitAll = bulkBtn('bulk-resubmit-matching', 'resubmit', '');
  cancelAll.textContent = 'Cancel all matching';
  resubmitAll.textContent = 'Resubmit all matching';
  const bar = can ? h('div.bulk-bar#bulk-bar', selInfo, cancelSel, resubmitSel, clearSel, h('div.spacer'), cancelAll, resubmitAll) : null;

  mount(el,
    h('div.page-head', h('h1', 'Jobs'), total, h('div.spacer'), liveDot,
      can ? h('a.btn.primary#submit-job', { href: '#/submit' }, 'Submit a job') : null),
    form,
    status,
    bar,
    result,
    h('div.table-wrap', table),
    h('div.pager', prev, pageInfo, next));

  function apply(resetForm) {
    f.q = resetForm ? '' : search.value.trim();
    f.model = resetForm ? '' : modelIn.value.trim();
    if (resetForm) { search.value = ''; modelIn.value = ''; routeSel.value = ''; ageSel.value = ''; }
    for (const b of stateBtns) b.setAttribute('aria-pressed', String(f.states.includes(b.dataset.state)));
    ctx.replace(hashOf(f));
    cursors.length = 0;
    cursor = '';
    load();
    follow();
  }

  function createdAfter() {
    const s = seconds(f.age);
    return s ? new Date(Date.now() - s * 1000) : null;
  }

  async function load() {
    const after = createdAfter();
    const url = `/v1/jobs${api.query({ route: f.route, state: f.states, model: f.model, created_after: after && after.toISOString(), q: f.q, cursor, limit: LIMIT })}`;
    table.classList.add('loading');
    try {
      page = await api.get(url);
      page.jobs = page.jobs || [];
      mount(status);
    } catch (err) {
      page = { jobs: [], next: '', total: 0 };
      mount(status, notice(err.status === 503 ? `The jobs index is not available: ${err.message}` : `The jobs did not load: ${err.message}`, 'error'));
    }
    table.classList.remove('loading');
    // The stream may have brought a newer version of a job while the page
    // loaded (an action's own events race its reload): keep the newer.
    const seen = new Map([...rows].map(([id, r]) => [id, r.e]));
    rows.clear();
    mount(tbody, page.jobs.map((e) => {
      const had = seen.get(e.id);
      return row(had && (had.seq || 0) > (e.seq || 0) ? had : e);
    }));
    for (const id of [...selected]) if (!rows.has(id)) selected.delete(id);
    renderSelection();
    if (!page.jobs.length && !status.childElementCount) {
      mount(tbody, h('tr.empty', h('td', { colSpan: can ? 11 : 10 }, filtered() ? 'No job matches these filters.' : 'No jobs yet. Submit one, or track one from the Track page.')));
    }
    renderTotals();
    renderCounts(page.counts, page.counts_capped);
  }

  function filtered() { return f.route || f.states.length || f.model || f.age || f.q; }

  function renderTotals() {
    const t = page.total || 0;
    total.textContent = `${fmtNum(t)}${page.total_capped ? '+' : ''} ${t === 1 ? 'job' : 'jobs'}${filtered() ? ' match' : ''}`;
    prev.disabled = !cursors.length;
    next.disabled = !page.next;
    const from = cursors.length * LIMIT;
    pageInfo.textContent = rows.size ? `${fmtNum(from + 1)}–${fmtNum(from + rows.size)}` : '';
  }

  function row(e) {
    const tr = h('tr', { 'data-id': e.id });
    rows.set(e.id, { e, tr });
    fill(tr, e);
    return tr;
  }

  function fill(tr, e) {
    const href = `#/jobs/${encodeURIComponent(e.id)}?route=${encodeURIComponent(e.route)}`;
    const st = e.rejected ? 'rejected' : e.state;
    tr.dataset.state = st;
    let prog = null;
    if (typeof e.progress === 'number' && !TERMINAL.has(e.state)) {
      prog = h('span.progress', { title: `${Math.round(e.progress * 100)}%` }, h('meter', { min: 0, max: 1, value: e.progress }), ` ${Math.round(e.progress * 100)}%`);
    } else if (typeof e.queue_position === 'number' && e.state === 'queued') {
      prog = h('span.muted', `#${e.queue_position} in queue`);
    }
    // The tick box is made once per row and kept through live updates,
    // so a click or the keyboard focus on it is never lost to one.
    let tick = tr.firstElementChild && tr.firstElementChild.matches('td.sel') ? tr.firstElementChild : null;
    if (can && !tick) {
      const id = e.id;
      tick = h('td.sel', h('input.sel', {
        type: 'checkbox', 'aria-label': `Select ${id}`,
        on: { change: (ev) => { if (ev.target.checked) selected.add(id); else selected.delete(id); renderSelection(); } },
      }));
      tr.prepend(tick);
    }
    if (tick) tick.firstElementChild.checked = selected.has(e.id);
    mountAfter(tr, tick,
      h('td', h('a.mono.id', { href, title: e.id }, e.id), e.tracked ? h('span.tag', { title: 'submitted elsewhere, tracked by Pollux' }, 'tracked') : null),
      h('td', chip(st)),
      h('td', e.route),
      h('td.model', e.model ? h('a', { href: `#/models/${encodeURIComponent(e.route)}/${encodeURIComponent(e.model)}`, title: e.model }, e.model) : '—'),
      h('td.num', prog || ''),
      h('td.num', fmtNum(e.polls || 0)),
      h('td', when(e.created_at)),
      h('td', when(e.updated_at)),
      h('td', mono(e.remote_id, 'dim')),
      h('td.note', { title: e.rejection_error || e.reason || e.waiting_for || '' }, e.rejection_error || e.reason || e.waiting_for || ''));
  }

  // Live updates: a job in the table changes in place; a new one that
  // matches appears on top of the first page.
  let lost = false;
  function follow() {
    if (es) es.close();
    lost = false;
    liveDot.textContent = 'connecting';
    liveDot.className = 'live';
    // The stream's ids let the browser resume where it left off (it
    // sends Last-Event-ID); when too much changed, a reset says reload.
    es = api.stream(`/v1/stream${api.query({ route: f.route })}`, ['job', 'reset'], (type, e) => {
      if (type === 'reset') { load(); return; }
      if (!e || !e.id) return;
      const have = rows.get(e.id);
      if (have) {
        if ((e.seq || 0) < (have.e.seq || 0)) return;
        have.e = e;
        if (!matches(f, e, createdAfter())) {
          have.tr.classList.add('stale');
        }
        fill(have.tr, e);
        flash(have.tr);
        return;
      }
      if (cursors.length || !page || !matches(f, e, createdAfter())) return;
      const empty = tbody.querySelector('tr.empty');
      if (empty) empty.remove();
      const tr = row(e);
      tbody.prepend(tr);
      flash(tr);
      while (rows.size > LIMIT) {
        const last = tbody.lastElementChild;
        rows.delete(last.dataset.id);
        selected.delete(last.dataset.id);
        last.remove();
      }
      renderSelection();
      page.total = (page.total || 0) + 1;
      renderTotals();
    }, (state) => {
      // The stream resumes after the last event seen (Last-Event-ID), so
      // the rows catch up by themselves; a job new to the page needs a
      // reload all the same.
      if (state === 'open' && lost) load();
      lost = state !== 'open';
      liveDot.textContent = state === 'open' ? 'live' : 'reconnecting';
      liveDot.className = `live ${state === 'open' ? 'on' : 'off'}`;
    });
  }

  function selectAll(on) {
    selected.clear();
    if (on) for (const id of rows.keys()) selected.add(id);
    for (const box of tbody.querySelectorAll('input.sel')) box.checked = on;
    renderSelection();
  }

  function renderSelection() {
    if (!can) return;
    const n = selected.size;
    bar.classList.toggle('has-selection', n > 0);
    selInfo.textContent = n ? `${fmtNum(n)} selected` : 'Tick jobs to act on them, or act on every job the filters match:';
    cancelSel.textContent = `Cancel ${fmtNum(n)} selected`;
    resubmitSel.textContent = `Resubmit ${fmtNum(n)} selected`;
    for (const b of [cancelSel, resubmitSel, clearSel]) b.hidden = !n;
    selAll.checked = n > 0 && n === rows.size;
    selAll.indeterminate = n > 0 && n < rows.size;
    const why = filtered() ? '' : 'Filter the list first: acting on every job is not offered';
    for (const b of [cancelAll, resubmitAll]) { b.disabled = !filtered(); b.title = why || `Act on every job the filters match (${total.textContent})`; }
  }

  // The filters as a bulk action's filter: GET /v1/jobs's parameters,
  // with the age fixed as a time now, so the dry run and the action count
  // the same jobs.
  function apiFilter() {
    const after = createdAfter();
    const out = {};
    if (f.route) out.route = f.route;
    if (f.states.length) out.state = f.states.join(',');
    if (f.model) out.model = f.model;
    if (f.q) out.q = f.q;
    if (after) out.created_after = after.toISOString();
    return out;
  }

  async function act(action, matching) {
    const target = matching ? { filter: apiFilter() } : { ids: [...selected] };
    const what = matching ? 'match the filters' : 'selected';
    const res = await bulkAction(action, target, what);
    if (!res) return;
    showResult(result, res);
    selectAll(false);
    load();
  }

  function flash(tr) {
    tr.classList.remove('flash');
    void tr.offsetWidth; // restart the animation
    tr.classList.add('flash');
  }

  // How many jobs are in each state now that match the other filters
  // (route, model, age, search): the counts /v1/jobs answers with a page,
  // refreshed on their own every 10 s.
  function renderCounts(counts, capped) {
    for (const b of stateBtns) {
      const n = (counts || {})[b.dataset.state];
      b.querySelector('.count').textContent = n ? `${fmtNum(n)}${capped ? '+' : ''}` : '';
    }
  }
  function refreshCounts() {
    const after = createdAfter();
    api.get(`/v1/jobs${api.query({ route: f.route, model: f.model, created_after: after && after.toISOString(), q: f.q, limit: 1 })}`)
      .then((body) => renderCounts(body && body.counts, body && body.counts_capped)).catch(() => {});
  }

  // The routes for the selector and the models for the datalist.
  loadRoutes().then((rs) => {
    for (const r of rs) routeSel.append(h('option', { value: r.name, selected: r.name === f.route }, r.name));
  }).catch(() => { if (f.route) routeSel.append(h('option', { value: f.route, selected: true }, f.route)); });
  const countsTimer = setInterval(refreshCounts, 10000);
  api.get(`/v1/models${api.query({ route: f.route })}`).then((body) => {
    const list = Array.isArray(body) ? body : (body && body.models) || [];
    const names = [...new Set(list.map((m) => (typeof m === 'string' ? m : m.model || m.name)).filter(Boolean))].sort();
    mount(models, names.map((n) => h('option', { value: n })));
  }).catch(() => {});

  await load();
  follow();
  return () => { if (es) es.close(); clearInterval(countsTimer); };
}
