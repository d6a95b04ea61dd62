// The @runwayml/sdk SDK, unchanged but for its base URL and key, against
// Pollux's Runway face. Each mode prints JSON lines for the test
// (internal/testkit/e2e/faces/runway_test.go) to check.
//
//   POLLUX_URL=http://127.0.0.1:8080 ROUTE=video TOKEN=… MODE=main node runway.mjs
//
// MODE=main    imageToVideo.create(…).waitForTaskOutput(); textToVideo
//              .create, tasks.delete, waitForTaskOutput of the canceled
//              task; a 404
// MODE=many    CLIENTS clients making JOBS tasks in all, each waiting with
//              waitForTaskOutput (its 6 ± 1.5 s polls)
// MODE=keyed   JOBS creates one after another, each with an
//              Idempotency-Key, retried by the app until answered
// MODE=image   imageToVideo.create with promptImage a data: URI of an
//              image (IMAGE_BYTES of image.mjs), waitForTaskOutput; prints
//              its sha256
// MODE=upload  uploads.createEphemeral of an image (IMAGE_BYTES of
//              image.mjs), its runwayUri as promptImage, waitForTaskOutput;
//              prints its sha256
// MODE=errors  a wrong key, a read-only key, a malformed create, an unknown
//              task, a quota (QUOTA_TOKEN, 1 request a second)
import RunwayML, { TaskFailedError } from '@runwayml/sdk';
import { imageBytes, sha256 } from './image.mjs';

const baseURL = `${process.env.POLLUX_URL}/runway/${process.env.ROUTE || 'video'}`;
const client = (apiKey = process.env.TOKEN, opts = {}) => new RunwayML({ apiKey, baseURL, ...opts });
const out = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const create = { model: 'gen4_turbo', promptImage: 'https://example.com/a.png', promptText: 'a lighthouse at dusk', ratio: '1280:720', duration: 5 };

function err(e) {
  return { class: e.constructor.name, status: e.status ?? null, error: e.error?.error ?? null, path: e.error?.issues?.[0]?.path ?? null, message: e.message };
}

async function main() {
  const runway = client();
  // The simulated provider fails a few jobs on purpose: the app tries
  // again, as one would.
  const tries = [];
  let task;
  while (!task) {
    try {
      task = await runway.imageToVideo.create(create).waitForTaskOutput();
    } catch (e) {
      if (!(e instanceof TaskFailedError) || tries.length > 5) throw e;
      tries.push(e.taskDetails.id);
    }
  }
  out({ step: 'done', task, failed: tries });
  const doomed = await runway.textToVideo.create({ model: 'gen4.5', promptText: 'to be deleted', ratio: '1280:720', duration: 5 });
  await runway.tasks.delete(doomed.id);
  try {
    await runway.tasks.retrieve(doomed.id).waitForTaskOutput();
    out({ step: 'deleted', id: doomed.id, error: null });
  } catch (e) {
    out({ step: 'deleted', id: doomed.id, error: { class: e.constructor.name, status: e.taskDetails?.status } });
  }
  try {
    await runway.tasks.retrieve('00000000-0000-0000-0000-000000000000');
  } catch (e) {
    out({ step: 'not_found', error: err(e) });
  }
}

async function many() {
  const clients = Number(process.env.CLIENTS || 50);
  const jobs = Number(process.env.JOBS || 200);
  let next = 0;
  let polls = 0; // the SDK's own polls, counted by its fetch option
  const counted = (url, init) => {
    if (String(url).includes('/v1/tasks/')) polls++;
    return fetch(url, init);
  };
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const runway = client(process.env.TOKEN, { fetch: counted });
    while (next < jobs) {
      const i = next++;
      const created = await runway.imageToVideo.create({ ...create, promptText: `job ${i}` });
      try {
        const task = await runway.tasks.retrieve(created.id).waitForTaskOutput();
        out({ i, client: c, id: created.id, status: task.status, outputs: task.output.length });
      } catch (e) {
        if (!(e instanceof TaskFailedError)) throw e;
        out({ i, client: c, id: created.id, status: e.taskDetails.status, failureCode: e.taskDetails.failureCode });
      }
    }
  }));
  out({ step: 'polls', polls });
}

// image: image-to-video, the image a data: URI as Runway's docs show.
async function image() {
  const runway = client();
  const bytes = imageBytes();
  const task = await runway.imageToVideo.create({ ...create, promptImage: `data:image/png;base64,${bytes.toString('base64')}` }).waitForTaskOutput();
  out({ step: 'image', id: task.id, status: task.status, sha256: sha256(bytes), size: bytes.length });
}

// upload: image-to-video through the SDK's own upload: createEphemeral
// posts the file to the uploadUrl it was given, then the task names it by
// its runwayUri.
async function upload() {
  const runway = client();
  const bytes = imageBytes();
  const { uri } = await runway.uploads.createEphemeral({ file: new File([bytes], 'frame.png', { type: 'image/png' }) });
  const task = await runway.imageToVideo.create({ ...create, promptImage: uri }).waitForTaskOutput();
  out({ step: 'upload', id: task.id, uri, status: task.status, sha256: sha256(bytes), size: bytes.length });
}

async function keyed() {
  const runway = client();
  const jobs = Number(process.env.JOBS || 10);
  for (let i = 0; i < jobs; i++) {
    const key = `${process.env.KEY_PREFIX}-${i}`;
    let tries = 0;
    for (;;) {
      tries++;
      try {
        const t = await runway.imageToVideo.create({ ...create, promptText: `keyed ${i}` }, { headers: { 'Idempotency-Key': key } });
        out({ i, key, id: t.id, tries });
        break;
      } catch (e) {
        // The gateway is down for longer than the SDK's own two retries:
        // the app retries, with the same key.
        if (!(e instanceof RunwayML.APIConnectionError) && !(e instanceof RunwayML.InternalServerError)) throw e;
        if (tries > 60) throw e;
        await sleep(500);
      }
    }
  }
}

async function errors() {
  const quota = client(process.env.QUOTA_TOKEN, { maxRetries: 0 });
  const attempts = [
    ['wrong_token', () => client('not-a-pollux-token').tasks.retrieve('00000000-0000-0000-0000-000000000000')],
    ['read_only', () => client(process.env.READ_TOKEN).imageToVideo.create(create)],
    ['no_model', () => client().textToVideo.create({ promptText: 'p' })],
    ['old_version', () => client(process.env.TOKEN, { runwayVersion: '2024-09-13' }).tasks.retrieve('00000000-0000-0000-0000-000000000000')],
    ['unknown', () => client().tasks.retrieve('00000000-0000-0000-0000-000000000000')],
    ['quota', async () => {
      for (let i = 0; i < 10; i++) await quota.tasks.retrieve('not-a-task').catch((e) => { if (e.status !== 404) throw e; });
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

const modes = { main, many, keyed, errors, image, upload };
await modes[process.env.MODE || 'main']();
