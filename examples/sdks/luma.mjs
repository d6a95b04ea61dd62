// The lumaai SDK, unchanged but for its base URL and key, against Pollux's
// Luma face. Each mode prints JSON lines for the test
// (internal/testkit/e2e/faces/luma_test.go) to check.
//
//   POLLUX_URL=http://127.0.0.1:8080 ROUTE=video TOKEN=… MODE=main node luma.mjs
//
// MODE=main    generations.create, the generations.get loop, a create
//              deleted at once (generations.delete), a 404
// MODE=many    CLIENTS clients making JOBS generations in all, each polling
// MODE=keyed   JOBS creates one after another, each with an
//              Idempotency-Key, retried by the app until answered
// MODE=image   generations.create with keyframes.frame0 an image, a data:
//              URI (IMAGE_BYTES of image.mjs), polled until done; prints
//              its sha256
// MODE=callbacks JOBS generations, each with a callback_url to a server of
//              the script's own (its secret in the URL, as an app should:
//              Luma signs nothing); prints each callback, until every
//              generation's ended one arrived (or DEADLINE_S)
// MODE=errors  a wrong key, a read-only key, a malformed create, an unknown
//              generation, a quota (QUOTA_TOKEN, 1 request a second)
// MODE=list    every generation of the route, LIMIT a page, by offset
import http from 'node:http';
import LumaAI from 'lumaai';
import { imageBytes, sha256 } from './image.mjs';

const baseURL = `${process.env.POLLUX_URL}/luma/${process.env.ROUTE || 'video'}`;
const client = (authToken = process.env.TOKEN, opts = {}) => new LumaAI({ authToken, baseURL, ...opts });
const out = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pollMs = Number(process.env.POLL_MS || 500);
const create = { model: 'ray-2', prompt: 'a lake at sunset', aspect_ratio: '16:9' };

// wait loops on generations.get until the generation ends, as Luma's
// samples do.
async function wait(luma, g) {
  let polls = 0;
  while (g.state !== 'completed' && g.state !== 'failed') {
    await sleep(pollMs);
    g = await luma.generations.get(g.id);
    polls++;
  }
  return { generation: g, polls };
}

function err(e) {
  const d = e.error?.detail;
  return { class: e.constructor.name, status: e.status ?? null, detail: typeof d === 'string' ? d : null, loc: Array.isArray(d) ? d[0]?.loc : null, message: e.message };
}

async function main() {
  const luma = client();
  const failed = []; // the simulated provider fails a few on purpose: the app tries again
  for (;;) {
    const created = await luma.generations.create(create);
    if (failed.length === 0) out({ step: 'create', generation: created });
    const { generation, polls } = await wait(luma, created);
    if (generation.state === 'completed' || failed.length > 5) {
      out({ step: 'done', generation, polls, failed });
      break;
    }
    failed.push(generation.id);
  }
  const doomed = await luma.generations.create({ ...create, prompt: 'to be deleted' });
  await luma.generations.delete(doomed.id);
  out({ step: 'deleted', generation: (await wait(luma, doomed)).generation });
  try {
    await luma.generations.get('00000000-0000-0000-0000-000000000000');
  } catch (e) {
    out({ step: 'not_found', error: err(e) });
  }
}

async function many() {
  const clients = Number(process.env.CLIENTS || 50);
  const jobs = Number(process.env.JOBS || 200);
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const luma = client();
    while (next < jobs) {
      const i = next++;
      const { generation, polls } = await wait(luma, await luma.generations.create({ ...create, prompt: `job ${i}` }));
      out({ i, client: c, id: generation.id, state: generation.state, video: generation.assets?.video ?? null, failure_reason: generation.failure_reason, polls });
    }
  }));
}

// image: image-to-video, frame0 an image the app gives inline.
async function image() {
  const luma = client();
  const bytes = imageBytes();
  const created = await luma.generations.create({ ...create, keyframes: { frame0: { type: 'image', url: `data:image/png;base64,${bytes.toString('base64')}` } } });
  const { generation } = await wait(luma, created);
  out({ step: 'image', id: created.id, state: generation.state, sha256: sha256(bytes), size: bytes.length });
}

// callbacks: generations followed by Luma's callbacks instead of polling.
// The URL carries a secret of the app's: a callback without it is not
// the app's (Luma's callbacks carry no signature).
async function callbacks() {
  const luma = client();
  const jobs = Number(process.env.JOBS || 20);
  const secret = 'app-secret-7d1f';
  const ended = new Set();
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const u = new URL(req.url, 'http://x');
      let g = {};
      try {
        g = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {}
      const ours = u.searchParams.get('secret') === secret;
      out({ step: 'callback', n: Number(u.searchParams.get('n')), ours, id: g.id, state: g.state, video: g.assets?.video ?? null });
      res.writeHead(ours ? 200 : 403).end();
      if (ours && (g.state === 'completed' || g.state === 'failed')) {
        ended.add(g.id);
        if (ended.size === jobs) finish();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hook = `http://127.0.0.1:${server.address().port}/luma`;
  await Promise.all(Array.from({ length: jobs }, async (_, n) => {
    const g = await luma.generations.create({ ...create, prompt: `callback ${n}`, callback_url: `${hook}?n=${n}&secret=${secret}` });
    out({ step: 'created', n, id: g.id });
  }));
  await Promise.race([all, new Promise((r) => setTimeout(r, Number(process.env.DEADLINE_S ?? 60) * 1000).unref())]);
  server.close();
}

async function keyed() {
  const luma = client();
  const jobs = Number(process.env.JOBS || 10);
  for (let i = 0; i < jobs; i++) {
    const key = `${process.env.KEY_PREFIX}-${i}`;
    let tries = 0;
    for (;;) {
      tries++;
      try {
        const g = await luma.generations.create({ ...create, prompt: `keyed ${i}` }, { headers: { 'Idempotency-Key': key } });
        out({ i, key, id: g.id, tries });
        break;
      } catch (e) {
        // The gateway is down for longer than the SDK's own two retries:
        // the app retries, with the same key.
        if (!(e instanceof LumaAI.APIConnectionError) && !(e instanceof LumaAI.InternalServerError)) throw e;
        if (tries > 60) throw e;
        await sleep(500);
      }
    }
  }
}

async function errors() {
  const quota = client(process.env.QUOTA_TOKEN, { maxRetries: 0 });
  const attempts = [
    ['wrong_token', () => client('not-a-pollux-token').generations.get('00000000-0000-0000-0000-000000000000')],
    ['read_only', () => client(process.env.READ_TOKEN).generations.create(create)],
    ['no_model', () => client().generations.create({ prompt: 'p' })],
    ['unknown', () => client().generations.get('00000000-0000-0000-0000-000000000000')],
    ['quota', async () => {
      for (let i = 0; i < 10; i++) await quota.generations.get('not-a-generation').catch((e) => { if (e.status !== 404) throw e; });
    }],
  ];
  for (const [name, call] of attempts) {
    try {
      await call();
      out({ name, error: null });
    } catch (e) {
      out({ name, error: err(e) });
    }
  }
}

async function list() {
  const luma = client();
  const limit = Number(process.env.LIMIT || 10);
  for (let offset = 0; ; offset += limit) {
    const page = await luma.generations.list({ limit, offset });
    for (const g of page.generations) out({ id: g.id, state: g.state });
    if (!page.has_more) break;
  }
}

const modes = { main, many, keyed, errors, list, image, callbacks };
await modes[process.env.MODE || 'main']();
