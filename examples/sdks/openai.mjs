// The openai SDK's videos API, unchanged but for its base URL and key,
// against Pollux's OpenAI face. Each mode prints JSON lines for the test
// (internal/testkit/e2e/faces/openai_test.go) to check.
//
//   POLLUX_URL=http://127.0.0.1:8080 ROUTE=sim TOKEN=… MODE=main node openai.mjs
//
// MODE=main    create, poll (the SDK's poll-helper way: sleep
//              openai-poll-after-ms), downloadContent, delete, 404s
// MODE=many    CLIENTS clients making JOBS videos in all, each polling
// MODE=image   a video from a reference image (IMAGE_BYTES, default 5 MB),
//              uploaded as the multipart input_reference
// MODE=keyed   JOBS creates one after another, each with an
//              Idempotency-Key, retried by the app until answered
// MODE=errors  a wrong token, a read-only token, a malformed create
// MODE=keyless one create without a key, its SDK retrying across a
//              gateway restart
// MODE=list    every video of the route, LIMIT a page, through the
//              SDK's auto-pagination
// MODE=outage  CLIENTS apps, each making a video of LONG_MODEL, then one
//              of SHORT_MODEL every second or so (each polled to its end
//              beside the next) until the file STOP exists, through a
//              NATS outage the test makes meanwhile; a create that throws
//              (after the SDK's own two retries) is retried by the app a
//              second later, a throw while polling is a failure the test
//              counts
import { existsSync } from 'node:fs';
import OpenAI, { toFile } from 'openai';
import { imageBytes, sha256 } from './image.mjs';

const base = `${process.env.POLLUX_URL}/openai/${process.env.ROUTE || 'sim'}/v1`;
const model = process.env.MODEL || 'openai/sora-2';
const client = (apiKey = process.env.TOKEN) => new OpenAI({ apiKey, baseURL: base });
const out = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// poll retrieves a video until it ends, sleeping what the face says
// (openai-poll-after-ms), as the SDK's own poll helpers do.
async function poll(openai, id) {
  let polls = 0;
  for (;;) {
    const { data, response } = await openai.videos.retrieve(id).withResponse();
    polls++;
    if (data.status === 'completed' || data.status === 'failed') return { video: data, polls };
    const after = Number.parseInt(response.headers.get('openai-poll-after-ms') ?? '5000');
    await sleep(Number.isNaN(after) ? 5000 : after);
  }
}

function err(e) {
  return { class: e.constructor.name, status: e.status ?? null, code: e.code ?? null, param: e.param ?? null, type: e.type ?? null, message: e.message };
}

async function main() {
  const openai = client();
  const created = await openai.videos.create({ model, prompt: 'a lighthouse at dusk', seconds: '8', size: '1280x720' }).withResponse();
  out({ step: 'create', video: created.data, poll_after: created.response.headers.get('openai-poll-after-ms') });
  const { video, polls } = await poll(openai, created.data.id);
  out({ step: 'done', video, polls });
  if (video.status === 'completed') {
    const res = await openai.videos.downloadContent(video.id);
    const bytes = Buffer.from(await res.arrayBuffer());
    out({ step: 'content', status: res.status, redirected: res.redirected, type: res.headers.get('content-type'), bytes: bytes.length });
  }
  // A delete cancels a video still being made.
  const running = await openai.videos.create({ model, prompt: 'to be deleted' });
  const del = await openai.videos.delete(running.id);
  out({ step: 'delete', deleted: del, after: (await poll(openai, running.id)).video });
  for (const call of [() => openai.videos.retrieve('video_0123456789abcdef0123456789abcdef'), () => openai.videos.downloadContent(video.id, { variant: 'thumbnail' })]) {
    try {
      await call();
      out({ step: 'not_found', error: null });
    } catch (e) {
      out({ step: 'not_found', error: err(e) });
    }
  }
}

async function many() {
  const clients = Number(process.env.CLIENTS || 50);
  const jobs = Number(process.env.JOBS || 200);
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const openai = client();
    while (next < jobs) {
      const i = next++;
      const v = await openai.videos.create({ model, prompt: `job ${i}` });
      const { video, polls } = await poll(openai, v.id);
      out({ i, client: c, id: video.id, status: video.status, error: video.error, polls });
    }
  }));
}

async function image() {
  const openai = client();
  const bytes = imageBytes();
  const created = await openai.videos.create({ model, prompt: 'image to video', seconds: '4', size: '720x1280',
    input_reference: await toFile(bytes, 'reference.png', { type: 'image/png' }) });
  const { video } = await poll(openai, created.id);
  out({ step: 'image', id: created.id, sha256: sha256(bytes), size: bytes.length, status: video.status });
}

async function keyed() {
  const openai = client();
  const jobs = Number(process.env.JOBS || 10);
  for (let i = 0; i < jobs; i++) {
    const key = `${process.env.KEY_PREFIX}-${i}`;
    let tries = 0;
    for (;;) {
      tries++;
      try {
        const v = await openai.videos.create({ model, prompt: `keyed ${i}` }, { headers: { 'Idempotency-Key': key } });
        out({ i, key, id: v.id, tries });
        break;
      } catch (e) {
        // The gateway is down for longer than the SDK's own two retries:
        // the app retries, with the same key.
        if (!(e instanceof OpenAI.APIConnectionError) && !(e instanceof OpenAI.InternalServerError)) throw e;
        if (tries > 60) throw e;
        await sleep(500);
      }
    }
  }
}

async function errors() {
  const attempts = [
    ['wrong_token', () => client('not-a-pollux-token').videos.retrieve('video_0123456789abcdef0123456789abcdef')],
    ['read_only', () => client(process.env.READ_TOKEN).videos.create({ model, prompt: 'p' })],
    ['no_prompt', () => client().videos.create({ model })],
    ['bad_seconds', () => client().videos.create({ model, prompt: 'p', seconds: 'forever' })],
    ['bad_reference', () => client().videos.create({ model, prompt: 'p', input_reference: new File(['not an image'], 'a.txt') })],
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

// keyless: one create without a key, the SDK's own retries allowed time
// to outlast a gateway restart (maxRetries, a client option): the answer
// it finally gets.
async function keyless() {
  const openai = new OpenAI({ apiKey: process.env.TOKEN, baseURL: base, maxRetries: 10 });
  const video = await openai.videos.create({ model, prompt: 'no key' });
  out({ step: 'keyless', id: video.id });
}

async function list() {
  for await (const v of client().videos.list({ limit: Number(process.env.LIMIT || 20) })) {
    out({ id: v.id, status: v.status });
  }
}

async function outage() {
  const clients = Number(process.env.CLIENTS || 6);
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const openai = client();
    const create = async (model, kind, n) => {
      for (let errors = 0; ; errors++) {
        try {
          const v = await openai.videos.create({ model, prompt: `${kind} ${c}-${n}` });
          return { id: v.id, create_errors: errors };
        } catch (e) {
          if (!(e instanceof OpenAI.APIError) || errors >= 300) throw e;
          await sleep(1000);
        }
      }
    };
    const report = async (kind, created) => {
      try {
        const { video, polls } = await poll(openai, created.id);
        out({ step: 'outage', client: c, kind, ...created, status: video.status, polls });
      } catch (e) {
        out({ step: 'outage', client: c, kind, ...created, status: 'error', error: err(e) });
      }
    };
    const jobs = [report('long', await create(process.env.LONG_MODEL, 'long', 0))];
    for (let n = 1; !existsSync(process.env.STOP); n++) {
      jobs.push(report('short', await create(process.env.SHORT_MODEL, 'short', n)));
      await sleep(1000);
    }
    await Promise.all(jobs);
  }));
}

const modes = { main, many, image, keyed, errors, keyless, list, outage };
await modes[process.env.MODE || 'main']();
