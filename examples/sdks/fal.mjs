// The fal client (@fal-ai/client), unchanged, against Pollux's fal face.
// Only its configuration differs from an app's calling fal itself: the
// credentials are a Pollux token, and proxyUrl sends every request to the
// face, the URL the client meant in x-fal-target-url.
//
//   POLLUX_URL=http://127.0.0.1:8080 POLLUX_TOKEN=... FAL_MODE=main node fal.mjs
//
// Each mode prints what the client saw as JSON lines:
//   main    subscribe, queue.submit/status/result, cancel, a model the
//           route's provider refuses
//   many    FAL_CLIENTS clients (default 50), each subscribing to
//           FAL_JOBS_EACH jobs in turn (default 4), at the default poll
//           interval
//   image   subscribe with a Blob input (IMAGE_BYTES, default 5 MB): the
//           client uploads it first, its storage initiate through the
//           proxy and a plain PUT to the upload_url it got, and sends the
//           file_url in the input
//   stream  subscribe in streaming mode (the status as an event stream),
//           then queue.submit and queue.streamStatus until COMPLETED
//   keyed   FAL_JOBS submits with an Idempotency-Key each, paced, retried
//           until answered (the gateway may die under them), then their
//           results
//   keyless one submit without a key, retried by the client across a
//           gateway restart
//   errors  a wrong token, a read-only token, a malformed input, a
//           webhookUrl over plain http beyond loopback, foreign
//           x-fal-target-urls, an unknown request; and a proxy URL
//           without its trailing slash (redirected to it)
//   webhooks FAL_JOBS submits (default 30) with a webhookUrl of the
//           app's own receiver (loopback), FAL_WORKERS at a time (default
//           20), each with an Idempotency-Key; every delivery is printed
//           as received — its X-Fal-Webhook-* headers and its raw body in
//           base64 — for the test to verify against Pollux's JWKS; it
//           returns once every request has had an OK or ERROR delivery,
//           or after FAL_DEADLINE_S (default 60); each answer takes
//           HOOK_DELAY_MS (default 0), as a busy app's does
//   outage  FAL_CLIENTS apps, each submitting a job of FAL_LONG, then one
//           of FAL_SHORT every second or so (each followed as subscribe
//           does, beside the next) until the file FAL_STOP exists,
//           through a NATS outage the test makes meanwhile; a submit that
//           throws (after the client's own retries) is retried by the app
//           a second later, a throw once submitted is a failure the test
//           counts
import { existsSync } from "node:fs";
import http from "node:http";
import { createFalClient } from "@fal-ai/client";
import { imageBytes, sha256 } from "./image.mjs";

const base = process.env.POLLUX_URL;
const route = process.env.FAL_ROUTE ?? "sim";
const app = process.env.FAL_APP ?? "acme/video";
const proxy = `${base}/fal/${route}/`;
const mode = process.env.FAL_MODE ?? "main";

function client(token, extra = {}) {
  return createFalClient({ credentials: token, proxyUrl: { url: proxy, when: "always" }, ...extra });
}

const out = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errorOf = (e) => ({ name: e.name, status: e.status, message: e.message, body: e.body, fieldErrors: e.fieldErrors });

// outcome is a request's result as the app sees it: its data, or the
// error the client threw.
async function outcome(fal, endpoint, requestId) {
  try {
    const r = await fal.queue.result(endpoint, { requestId });
    return { requestId, resultRequestId: r.requestId, data: r.data };
  } catch (e) {
    return { requestId, error: errorOf(e) };
  }
}

async function main() {
  const fal = client(process.env.POLLUX_TOKEN);

  // subscribe: submit, poll the status until COMPLETED, fetch the result.
  let requestId;
  const statuses = [];
  try {
    const r = await fal.subscribe(app, {
      input: { prompt: "a fox" }, logs: true,
      onEnqueue: (id) => { requestId = id; },
      onQueueUpdate: (s) => { statuses.push(s.status); },
    });
    out({ op: "subscribe", requestId, resultRequestId: r.requestId, data: r.data, statuses });
  } catch (e) {
    out({ op: "subscribe", requestId, error: errorOf(e), statuses });
  }

  // The queue's calls one by one.
  const sub = await fal.queue.submit(app, { input: { prompt: "a hare" } });
  let st;
  for (;;) {
    st = await fal.queue.status(app, { requestId: sub.request_id, logs: true });
    if (st.status === "COMPLETED") break;
    await sleep(200);
  }
  out({ op: "queue", submitted: sub, status: st, ...(await outcome(fal, app, sub.request_id)) });

  // A cancel right after the submit, and one once it has ended.
  const c = await fal.queue.submit(app, { input: { prompt: "a stoat" } });
  let cancel = "accepted";
  try { await fal.queue.cancel(app, { requestId: c.request_id }); } catch (e) { cancel = errorOf(e); }
  await fal.queue.subscribeToStatus(app, { requestId: c.request_id, mode: "polling", pollInterval: 200 });
  const res = await outcome(fal, app, c.request_id);
  let again;
  try { await fal.queue.cancel(app, { requestId: c.request_id }); again = "accepted"; } catch (e) { again = errorOf(e); }
  out({ op: "cancel", cancel, again, ...res });

  // An endpoint the route's provider refuses (Replicate models are
  // owner/name): COMPLETED, and the result is the error.
  const bad = `${app}/no/such/path`;
  let badId;
  try {
    await fal.subscribe(bad, { input: {}, onEnqueue: (id) => { badId = id; } });
    out({ op: "refused", requestId: badId, error: null });
  } catch (e) {
    out({ op: "refused", requestId: badId, error: errorOf(e) });
  }
}

async function many() {
  const clients = Number(process.env.FAL_CLIENTS ?? 50);
  const each = Number(process.env.FAL_JOBS_EACH ?? 4);
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const fal = client(process.env.POLLUX_TOKEN);
    for (let i = 0; i < each; i++) {
      let requestId;
      try {
        const r = await fal.subscribe(app, { input: { prompt: `clip ${c}-${i}` }, onEnqueue: (id) => { requestId = id; } });
        out({ op: "many", client: c, requestId, resultRequestId: r.requestId, data: r.data });
      } catch (e) {
        out({ op: "many", client: c, requestId, error: errorOf(e) });
      }
    }
  }));
}

// retrying calls fn until it answers, while Pollux's gateway is away:
// the client's own retries (3 on submit, with backoff) may not span a
// restart.
async function retrying(fn) {
  const until = Date.now() + 60_000;
  for (let n = 1; ; n++) {
    try {
      return await fn();
    } catch (e) {
      const transient = e.status === undefined || e.status === 429 || e.status >= 500;
      if (!transient || Date.now() > until) throw e;
      await sleep(250);
    }
  }
}

async function image() {
  const fal = client(process.env.POLLUX_TOKEN);
  const bytes = imageBytes();
  let requestId;
  try {
    const r = await fal.subscribe(app, {
      input: { prompt: "image to video", image_url: new Blob([bytes], { type: "image/png" }) },
      onEnqueue: (id) => { requestId = id; },
    });
    out({ op: "image", id: requestId, sha256: sha256(bytes), size: bytes.length, data: r.data });
  } catch (e) {
    out({ op: "image", id: requestId, error: errorOf(e) });
  }
}

async function stream() {
  const fal = client(process.env.POLLUX_TOKEN);
  let requestId;
  const statuses = [];
  try {
    const r = await fal.subscribe(app, {
      input: { prompt: "a fox" }, mode: "streaming",
      onEnqueue: (id) => { requestId = id; },
      onQueueUpdate: (s) => { statuses.push(s.status); },
    });
    out({ op: "stream-subscribe", requestId, resultRequestId: r.requestId, data: r.data, statuses });
  } catch (e) {
    out({ op: "stream-subscribe", requestId, error: errorOf(e), statuses });
  }
  const { request_id: id } = await fal.queue.submit(app, { input: { prompt: "a fox" } });
  const s = await fal.queue.streamStatus(app, { requestId: id });
  const seen = [];
  s.on("data", (d) => { seen.push(d.status); });
  const last = await s.done();
  out({ op: "streamStatus", requestId: id, statuses: seen, last: last?.status });
}

async function keyed() {
  const jobs = Number(process.env.FAL_JOBS ?? 60);
  const workers = 6;
  const attempts = {}; // requests that reached the wire, by key
  const counting = (url, init) => {
    const key = init?.headers?.["idempotency-key"];
    if (key) attempts[key] = (attempts[key] ?? 0) + 1;
    return fetch(url, init);
  };
  const fal = client(process.env.POLLUX_TOKEN, { fetch: counting });
  const ids = {};
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    for (let i = w; i < jobs; i += workers) {
      const key = `${process.env.FAL_KEY_PREFIX ?? "kill"}-${i}`;
      const s = await retrying(() => fal.queue.submit(app, { input: { prompt: `clip ${i}` }, headers: { "Idempotency-Key": key } }));
      ids[key] = s.request_id;
      await sleep(100);
    }
  }));
  await Promise.all(Object.entries(ids).map(async ([key, requestId]) => {
    for (;;) {
      const st = await retrying(() => fal.queue.status(app, { requestId }));
      if (st.status === "COMPLETED") break;
      await sleep(500);
    }
    const r = await retrying(async () => {
      const o = await outcome(fal, app, requestId);
      if (o.error && (o.error.status === undefined || o.error.status >= 502)) throw o.error;
      return o;
    });
    out({ op: "keyed", key, attempts: attempts[key], ...r });
  }));
}

async function errors() {
  const probe = async (op, fn) => {
    try { out({ op, ok: await fn() }); } catch (e) { out({ op, error: errorOf(e) }); }
  };
  await probe("wrong-token", () => client("not-a-pollux-token").queue.submit(app, { input: {} }));
  await probe("read-only-submit", () => client(process.env.POLLUX_READ_TOKEN).queue.submit(app, { input: {} }));
  const { request_id } = await client(process.env.POLLUX_TOKEN).queue.submit(app, { input: {} });
  await probe("read-only-status", () => client(process.env.POLLUX_READ_TOKEN).queue.status(app, { requestId: request_id }));
  await probe("read-only-cancel", () => client(process.env.POLLUX_READ_TOKEN).queue.cancel(app, { requestId: request_id }));
  await probe("malformed", () => client(process.env.POLLUX_TOKEN).queue.submit(app, { input: ["not", "an", "object"] }));
  await probe("bad-webhook", () => client(process.env.POLLUX_TOKEN).queue.submit(app, { input: {}, webhookUrl: "http://app.example/hook" }));
  await probe("unknown-request", () => client(process.env.POLLUX_TOKEN).queue.status(app, { requestId: "00000000-0000-4000-8000-000000000000" }));

  // Foreign targets: the client takes a URL on a fal-looking host as the
  // endpoint and asks the proxy for it as it is.
  const fal = client(process.env.POLLUX_TOKEN);
  for (const target of ["https://evilfal.run/acme/video", "https://fal.run/acme/video", "https://rest.alpha.fal.ai/storage/upload",
    "http://queue.fal.run/acme/video", "https://user:secret@queue.fal.run/acme/video"]) {
    await probe(`foreign ${target}`, () => fal.queue.submit(target, { input: {} }));
  }
  // A target on this machine, which would see any request forwarded.
  let hits = 0;
  const trap = http.createServer((req, res) => { hits++; res.end("{}"); });
  await new Promise((r) => trap.listen(0, "127.0.0.1", r));
  const trapURL = `http://127.0.0.1:${trap.address().port}`;
  const viaMiddleware = client(process.env.POLLUX_TOKEN, {
    requestMiddleware: async (req) => ({ ...req, url: proxy, headers: { ...req.headers, "x-fal-target-url": `${trapURL}/acme/video` } }),
  });
  await probe("foreign local", () => viaMiddleware.queue.submit(app, { input: {} }));
  trap.close();
  out({ op: "trap", hits });

  await probe("no-slash", () => createFalClient({ credentials: process.env.POLLUX_TOKEN, proxyUrl: { url: proxy.replace(/\/$/, ""), when: "always" } })
    .queue.submit(app, { input: {} }));
}

// keyless: one submit without a key; the client retries it on a broken
// connection (1, 2, 4 s) while the gateway restarts: the answer it
// finally gets.
async function keyless() {
  const { request_id } = await client(process.env.POLLUX_TOKEN).queue.submit(app, { input: { prompt: "no key" } });
  out({ op: "keyless", request_id });
}

async function outage() {
  const clients = Number(process.env.FAL_CLIENTS ?? 6);
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const fal = client(process.env.POLLUX_TOKEN);
    const submit = async (model, kind, n) => {
      for (let errors = 0; ; errors++) {
        try {
          const { request_id } = await fal.queue.submit(model, { input: { prompt: `${kind} ${c}-${n}` } });
          return { requestId: request_id, create_errors: errors };
        } catch (e) {
          if (errors >= 300) throw e;
          await sleep(1000);
        }
      }
    };
    // report follows a request as subscribe does: its status until
    // COMPLETED, then its result.
    const report = async (model, kind, s) => {
      try {
        await fal.queue.subscribeToStatus(model, { requestId: s.requestId, mode: "polling" });
        await fal.queue.result(model, { requestId: s.requestId });
        out({ op: "outage", client: c, kind, ...s, status: "completed" });
      } catch (e) {
        out({ op: "outage", client: c, kind, ...s, status: "error", error: errorOf(e) });
      }
    };
    const long = process.env.FAL_LONG, short = process.env.FAL_SHORT;
    const jobs = [report(long, "long", await submit(long, "long", 0))];
    for (let n = 1; !existsSync(process.env.FAL_STOP); n++) {
      jobs.push(report(short, "short", await submit(short, "short", n)));
      await sleep(1000);
    }
    await Promise.all(jobs);
  }));
}

async function webhooks() {
  const jobs = Number(process.env.FAL_JOBS ?? 30);
  const workers = Number(process.env.FAL_WORKERS ?? 20);
  const fal = client(process.env.POLLUX_TOKEN);
  const done = new Set();
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const n = Number(new URL(req.url, "http://x").searchParams.get("n"));
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith("x-fal-webhook-")));
      let status;
      try {
        status = JSON.parse(raw.toString("utf8")).status;
      } catch {}
      out({ op: "delivery", n, headers, body: raw.toString("base64") });
      setTimeout(() => res.writeHead(200).end(), Number(process.env.HOOK_DELAY_MS ?? 0));
      if (status === "OK" || status === "ERROR") {
        done.add(n);
        if (done.size === jobs) finish();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const hook = `http://127.0.0.1:${server.address().port}/hook`;
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    for (let n = w; n < jobs; n += workers) {
      const key = `${process.env.FAL_KEY_PREFIX ?? "hook"}-${n}`;
      const s = await retrying(() => fal.queue.submit(app, {
        input: { prompt: `hook ${n}` }, webhookUrl: `${hook}?n=${n}`, headers: { "Idempotency-Key": key },
      }));
      out({ op: "created", n, requestId: s.request_id, gatewayRequestId: s.gateway_request_id });
    }
  }));
  await Promise.race([all, new Promise((r) => setTimeout(r, Number(process.env.FAL_DEADLINE_S ?? 60) * 1000).unref())]);
  server.close();
  server.closeAllConnections();
}

await ({ main, many, image, stream, keyed, errors, keyless, outage, webhooks })[mode]();
