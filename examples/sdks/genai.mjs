// The @google/genai SDK's video API, unchanged but for its base URL and
// key, against Pollux's genai face. Each mode prints JSON lines for the
// test (internal/testkit/e2e/faces/genai_test.go) to check.
//
//   POLLUX_URL=http://127.0.0.1:8080 ROUTE=sim TOKEN=… MODE=main node genai.mjs
//
// @google/genai 3.1.0 sends generateVideos in Vertex AI mode only (express
// mode: vertexai with an apiKey); the Gemini API shape is what older SDKs
// and REST apps send, polled here with the SDK in Gemini API mode.
//
// MODE=main    generateVideos, the getVideosOperation loop, files.download
//              of the video (and a fetch of its uri), then the Gemini API
//              shape: a REST predictLongRunning polled by getVideosOperation
// MODE=many    CLIENTS clients making JOBS videos in all, each polling
// MODE=keyed   JOBS creates one after another, each with an
//              Idempotency-Key, retried by the app until answered
// MODE=image   generateVideos with an image (imageBytes: IMAGE_BYTES of
//              image.mjs, base64), polled until done; prints its sha256
// MODE=errors  a wrong key, a read-only key, a malformed create, an unknown
//              operation, a quota (QUOTA_TOKEN, 1 request a second)
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoogleGenAI, GenerateVideosOperation, ApiError } from '@google/genai';
import { imageBytes, sha256 } from './image.mjs';

const base = `${process.env.POLLUX_URL}/genai/${process.env.ROUTE || 'sim'}`;
const model = process.env.MODEL || 'veo-3.1-generate-preview';
const pollMs = Number(process.env.POLL_MS || 500); // Google's samples sleep 10 s
const vertex = (apiKey = process.env.TOKEN) => new GoogleGenAI({ vertexai: true, apiKey, httpOptions: { baseUrl: base } });
const gemini = (apiKey = process.env.TOKEN) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: base, apiVersion: 'v1beta' } });
const out = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// wait polls an operation until it is done, as Google's samples do.
async function wait(ai, operation) {
  let polls = 0;
  while (!operation.done) {
    await sleep(pollMs);
    operation = await ai.operations.getVideosOperation({ operation });
    polls++;
  }
  return { operation, polls };
}

function err(e) {
  let body = null;
  try {
    body = JSON.parse(e.message).error;
  } catch {}
  return { class: e.constructor.name, status: e.status ?? null, code: body?.code ?? null, rpc: body?.status ?? null,
    field: body?.details?.[0]?.fieldViolations?.[0]?.field ?? null, message: e.message };
}

// fileOf is the files/ name of a video's uri: the SDK parses it out of an
// https uri itself, not out of the plain-http one of a loopback gateway.
const fileOf = (uri) => `files/${new URL(uri).pathname.split('/files/')[1].split(':')[0]}`;

async function main() {
  const ai = vertex();
  const created = await ai.models.generateVideos({ model, source: { prompt: 'a lighthouse at dusk' }, config: { numberOfVideos: 1, durationSeconds: 8 } });
  out({ step: 'create', operation: created });
  const { operation, polls } = await wait(ai, created);
  out({ step: 'done', operation, polls });
  const video = operation.response?.generatedVideos?.[0];
  if (video) {
    const path = join(tmpdir(), `genai-${process.pid}.mp4`);
    await ai.files.download({ file: fileOf(video.video.uri), downloadPath: path });
    const bytes = readFileSync(path).length;
    rmSync(path);
    const res = await fetch(video.video.uri, { headers: { 'x-goog-api-key': process.env.TOKEN } });
    out({ step: 'download', bytes, fetched: (await res.arrayBuffer()).byteLength, status: res.status });
  }
  // The Gemini API shape: the REST create, the SDK's poll (on GEMINI_ROUTE,
  // a model route naming the model its members run).
  const gbase = `${process.env.POLLUX_URL}/genai/${process.env.GEMINI_ROUTE || process.env.ROUTE || 'sim'}`;
  const failed = []; // the simulated provider fails a few on purpose: the app tries again
  for (;;) {
    const res = await fetch(`${gbase}/v1beta/models/veo-3.1-generate-preview:predictLongRunning`, {
      method: 'POST', headers: { 'x-goog-api-key': process.env.TOKEN, 'content-type': 'application/json' },
      body: JSON.stringify({ instances: [{ prompt: 'a harbour at dawn' }], parameters: { sampleCount: 1 } }),
    });
    const op = Object.assign(new GenerateVideosOperation(), await res.json());
    const g = await wait(new GoogleGenAI({ apiKey: process.env.TOKEN, httpOptions: { baseUrl: gbase, apiVersion: 'v1beta' } }), op);
    if (!g.operation.error || failed.length > 5) {
      out({ step: 'gemini', name: op.name, operation: g.operation, failed });
      break;
    }
    failed.push(op.name);
  }
}

async function many() {
  const clients = Number(process.env.CLIENTS || 50);
  const jobs = Number(process.env.JOBS || 200);
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const ai = vertex();
    while (next < jobs) {
      const i = next++;
      const created = await ai.models.generateVideos({ model, source: { prompt: `job ${i}` } });
      const { operation, polls } = await wait(ai, created);
      out({ i, client: c, name: operation.name, id: operation.name.split('/').pop(), error: operation.error ?? null,
        videos: operation.response?.generatedVideos?.length ?? 0, polls });
    }
  }));
}

async function keyed() {
  const ai = vertex();
  const jobs = Number(process.env.JOBS || 10);
  for (let i = 0; i < jobs; i++) {
    const key = `${process.env.KEY_PREFIX}-${i}`;
    let tries = 0;
    for (;;) {
      tries++;
      try {
        const op = await ai.models.generateVideos({ model, source: { prompt: `keyed ${i}` }, config: { httpOptions: { headers: { 'Idempotency-Key': key } } } });
        out({ i, key, id: op.name.split('/').pop(), tries });
        break;
      } catch (e) {
        // The SDK retries nothing by default: the app retries, with the
        // same key, while the gateway is down.
        if (e instanceof ApiError && e.status < 500) throw e;
        if (tries > 60) throw e;
        await sleep(500);
      }
    }
  }
}

// image: image-to-video, the image inline as the SDK sends imageBytes.
async function image() {
  const ai = vertex();
  const bytes = imageBytes();
  const created = await ai.models.generateVideos({ model, source: { prompt: 'image to video',
    image: { imageBytes: bytes.toString('base64'), mimeType: 'image/png' } } });
  const { operation } = await wait(ai, created);
  out({ step: 'image', id: created.name.split('/').pop(), sha256: sha256(bytes), size: bytes.length, done: operation.done,
    error: operation.error ?? null, videos: operation.response?.generatedVideos?.length ?? 0 });
}

async function errors() {
  const unknown = Object.assign(new GenerateVideosOperation(), { name: `models/${model}/operations/abcdefghijklmnopqrstuvwxyz` });
  const quota = vertex(process.env.QUOTA_TOKEN);
  const nope = Object.assign(new GenerateVideosOperation(), { name: `models/${model}/operations/nope` });
  const attempts = [
    ['wrong_token', () => vertex('not-a-pollux-token').models.generateVideos({ model, source: { prompt: 'p' } })],
    ['read_only', () => vertex(process.env.READ_TOKEN).models.generateVideos({ model, source: { prompt: 'p' } })],
    ['no_prompt', () => vertex().models.generateVideos({ model, source: {} })],
    ['unknown', () => gemini().operations.getVideosOperation({ operation: unknown })],
    ['quota', async () => {
      for (let i = 0; i < 10; i++) await quota.operations.getVideosOperation({ operation: nope }).catch((e) => { if (e.status !== 404) throw e; });
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

const modes = { main, many, keyed, errors, image };
await modes[process.env.MODE || 'main']();
