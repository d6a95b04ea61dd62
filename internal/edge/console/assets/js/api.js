// The front door's HTTP API, as the console uses it: JSON in and out,
// errors as {"error":{"code","message","field"}}, and the session's CSRF
// token on every state-changing request.

let csrf = '';

/** Sets the CSRF token sent with every state-changing request. */
export function setCSRF(token) { csrf = token || ''; }

/** An error the API answered with (or a network failure: status 0). */
export class APIError extends Error {
  constructor(status, code, message, field) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
    this.field = field || '';
  }
}

// snake turns Go's field names (RemoteID, DetectP50) into the JSON API's
// (remote_id, detect_p50), so the console reads either.
function snake(k) {
  if (!/[A-Z]/.test(k)) return k;
  return k
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .toLowerCase();
}

// Keys under these hold the caller's own names, kept as they are.
const verbatim = new Set(['metadata', 'counts', 'leases', 'waiting']);

/** Returns v with every object key in snake_case (recursively). */
export function norm(v, keep = false) {
  if (Array.isArray(v)) return v.map((x) => norm(x));
  if (v === null || typeof v !== 'object') return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    const key = keep ? k : snake(k);
    out[key] = verbatim.has(key) ? normShallow(x) : norm(x);
  }
  return out;
}

function normShallow(x) {
  if (x === null || typeof x !== 'object' || Array.isArray(x)) return norm(x);
  const out = {};
  for (const [k, y] of Object.entries(x)) out[k] = norm(y);
  return out;
}

async function problem(res) {
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  const e = body && (body.error || body);
  const msg = (e && (e.message || e.detail || e.title)) || `${res.status} ${res.statusText}`;
  return new APIError(res.status, e && e.code, msg, e && e.field);
}

/** Performs a request and returns its decoded JSON body (null when empty). */
export async function request(method, url, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET' && method !== 'HEAD') {
    if (csrf && !opts.noCSRF) headers['X-CSRF-Token'] = csrf;
    if (body instanceof URLSearchParams) {
      init.body = body;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (err) {
    throw new APIError(0, 'network', `the front door did not answer (${err.message})`);
  }
  if (!res.ok) {
    const err = await problem(res);
    // A session that ended (expired, or its token left the tokens file)
    // sends the console back to its login.
    if (res.status === 401 && !opts.noSignOut) window.dispatchEvent(new CustomEvent('pollux:unauthorized'));
    throw err;
  }
  if (res.status === 204) return null;
  const text = await res.text();
  if (!text) return null;
  try { return norm(JSON.parse(text)); } catch { return text; }
}

export const get = (url) => request('GET', url);
export const post = (url, body, opts) => request('POST', url, body, opts);

/** Builds a query string from the set values of params. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
    q.set(k, Array.isArray(v) ? v.join(',') : String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The browser's session: {role, name, csrf}, or null when login is needed. */
export async function session() {
  const res = await fetch('/console/session', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } });
  if (res.status === 401) return null;
  if (res.status === 404) return { role: 'act', name: '', csrf: '', auth: false }; // a front door without sessions
  if (!res.ok) throw await problem(res);
  return norm(await res.json());
}

export const login = (token) => post('/console/login', new URLSearchParams({ token }), { noSignOut: true });
export const logout = () => post('/console/logout');

/** Opens an EventSource; onEvent(type, data, id) for each named type. */
export function stream(url, types, onEvent, onState) {
  const es = new EventSource(url, { withCredentials: true });
  for (const t of types) {
    es.addEventListener(t, (ev) => {
      let data = null;
      try { data = norm(JSON.parse(ev.data)); } catch { return; }
      onEvent(t, data, ev.lastEventId);
    });
  }
  if (onState) {
    es.addEventListener('open', () => onState('open'));
    es.addEventListener('error', () => onState(es.readyState === EventSource.CLOSED ? 'closed' : 'retrying'));
  }
  return es;
}

/** Submits a job (POST /v1/jobs): body is a submission with its route. */
export const submit = (body) => post('/v1/jobs', body);

/**
 * A bulk action, "cancel" or "resubmit", on target ({ids} or {filter}):
 * without confirm a dry run ({matched, sample}), with it the outcome of
 * each job ({accepted, skipped, results}); a count that changed meanwhile
 * is an APIError with status 409.
 */
export function bulk(action, target, reason, confirm) {
  const body = { ...target };
  if (reason) body.reason = reason;
  if (confirm !== undefined) body.confirm = confirm;
  return post(`/v1/jobs/${action}`, body);
}

/** Resubmits a failed, lost or expired job as a new one; input is optional. */
export function resubmit(id, reason, input) {
  const body = {};
  if (reason) body.reason = reason;
  if (input !== undefined) body.input = input;
  return post(`/v1/jobs/${encodeURIComponent(id)}/resubmit`, body);
}
