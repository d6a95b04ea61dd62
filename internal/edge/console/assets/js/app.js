// The console's shell: who the browser is, the hash router, and the header.
import * as api from './api.js';
import { h, mount, tick, toast } from './ui.js';
import { overview } from './views/overview.js';
import { jobs } from './views/jobs.js';
import { job } from './views/job.js';
import { model } from './views/model.js';
import { track } from './views/track.js';
import { submitView } from './views/submit.js';
import { loginView } from './views/login.js';
import { spendView } from './views/spend.js';

const view = document.getElementById('view');

/** What every view is given. */
const ctx = {
  session: null,
  /** Whether the session may act (submit, cancel, track, pause). */
  canAct() { return !!this.session && this.session.role !== 'read'; },
  /** Why an action is unavailable, for its title. */
  readOnlyWhy: 'read-only session: this token may look, not act',
  params: new URLSearchParams(),
  go(hash) { if (location.hash === hash) route(); else location.hash = hash; },
  /** Replaces the hash without a history entry or a re-render. */
  replace(hash) { history.replaceState(null, '', hash); },
};

// Each view returns a cleanup function (or nothing); the router calls it
// when the view is left, closing its streams and timers.
let cleanup = null;

const routes = [
  [/^\/?$/, 'overview', () => overview],
  [/^\/jobs\/?$/, 'jobs', () => jobs],
  [/^\/submit\/?$/, 'jobs', () => submitView],
  [/^\/jobs\/([^/]+)$/, 'jobs', (m) => (c, el) => job(c, el, decodeURIComponent(m[1]))],
  [/^\/models\/([^/]+)\/(.+)$/, 'overview', (m) => (c, el) => model(c, el, decodeURIComponent(m[1]), decodeURIComponent(m[2]))],
  [/^\/track\/?$/, 'track', () => track],
  [/^\/spend\/?$/, 'spend', () => spendView],
];

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* already gone */ } cleanup = null; }
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, q = ''] = raw.split('?');
  ctx.params = new URLSearchParams(q);
  if (!ctx.session) {
    setNav('');
    cleanup = loginView(ctx, view, start);
    return;
  }
  for (const [re, nav, make] of routes) {
    const m = path.match(re);
    if (!m) continue;
    setNav(nav);
    const fn = make(m);
    view.dataset.view = nav;
    try {
      cleanup = await fn(ctx, view) || null;
    } catch (err) {
      mount(view, h('div.notice.error', `This page failed: ${err.message}`));
    }
    return;
  }
  mount(view, h('div.notice', 'No such page. ', h('a', { href: '#/' }, 'Go to the overview')));
}

function setNav(active) {
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.nav === active);
}

function renderWho() {
  const who = document.getElementById('who');
  const s = ctx.session;
  if (!s) { mount(who); return; }
  const role = s.role === 'read' ? 'read-only' : s.role === 'admin' || !s.auth ? 'operator' : 'app';
  const scope = s.all_apps === false ? `app ${s.app || '(none)'}` : '';
  mount(who,
    h(`span.role.${s.role === 'read' ? 'ro' : 'rw'}`, { id: 'role', 'data-role': s.role || 'act', title: s.role === 'read' ? 'This session may look but not act' : 'This session may submit, cancel, track and pause' }, role),
    scope ? h('span.app', { id: 'app', 'data-app': s.app || '', title: 'This session sees only this app\'s jobs and spend' }, scope) : null,
    s.name ? h('span.name', s.name) : null,
    s.auth ? h('button.btn.link', { id: 'logout', on: { click: doLogout } }, 'Sign out')
      : h('span.muted.small', { title: 'The front door has no tokens file: every request is allowed' }, 'no login'));
  document.body.classList.toggle('readonly', s.role === 'read');
}

async function doLogout() {
  try { await api.logout(); } catch (err) { toast(`Sign out failed: ${err.message}`, 'error'); return; }
  ctx.session = null;
  api.setCSRF('');
  renderWho();
  route();
}

/** Asks the front door who this browser is, then shows the page. */
async function start() {
  try {
    ctx.session = await api.session();
  } catch (err) {
    ctx.session = null;
    mount(view, h('div.notice.error', `The front door did not answer /console/session: ${err.message}`));
    return;
  }
  api.setCSRF(ctx.session && ctx.session.csrf);
  renderWho();
  route();
}

window.addEventListener('hashchange', () => route());
window.addEventListener('pollux:unauthorized', () => {
  if (!ctx.session || !ctx.session.auth) return;
  ctx.session = null;
  api.setCSRF('');
  renderWho();
  toast('The session ended: sign in again.', 'error');
  route();
});
// "/" focuses the page's search box, as in most consoles.
window.addEventListener('keydown', (ev) => {
  if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return;
  const search = document.querySelector('input[type=search]');
  if (search) { ev.preventDefault(); search.focus(); }
});
setInterval(() => tick(view), 1000);
start();
