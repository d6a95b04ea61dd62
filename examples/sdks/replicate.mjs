// Replicate's SDK (replicate@1.4.0), unchanged, against Pollux's Replicate
// face: only its baseUrl and auth differ from an app that runs on
// Replicate. It prints one JSON line per result, for the faces e2e test
// (internal/testkit/e2e/faces/replicate_test.go) to check.
//
//   POLLUX_URL=http://127.0.0.1:8080 POLLUX_TOKEN=... MODE=main node replicate.mjs
//
// Modes (MODE, or the first argument):
//   main    run() blocking and polling, predictions.create/get/cancel, wait()
//   load    CLIENTS clients (one SDK client each) run JOBS jobs in all:
//           even clients run() blocking, odd ones create and wait() at the
//           SDK's default 500 ms poll interval
//   errors  what the SDK throws for a wrong token, a read-only token
//           (READ_TOKEN), a body without input, a webhook, an unknown id,
//           and a token over its quota (SLOW_TOKEN)
//   keyed   one create carrying Idempotency-Key: KEY through a custom
//           fetch that retries a create whose connection broke, then wait()
//   images  as load, each job with an image of its own (IMAGE_BYTES)
//   image   one image-to-video job whose input carries a Buffer (IMAGE_BYTES,
//           default 5 MB): the SDK uploads it through files.create, its
//           default fileEncodingStrategy, and puts urls.get in the input;
//           with KEY, every request carries Idempotency-Key: KEY and a
//           create whose connection broke is retried (as keyed)
//   keyless one create as the SDK sends it (no key), reporting its error
//   webhooks JOBS predictions with webhooks to a receiver of the app's
//           own, each delivery checked with the SDK's validateWebhook()
//           and answered after HOOK_DELAY_MS (default 0)
//   list    every prediction of the route, through paginate(predictions.list)
//   outage  CLIENTS apps, each running a job of LONG_MODEL, then creating
//           a job of SHORT_MODEL every second or so (each followed to its
//           end beside the next) until the file STOP exists, through a
//           NATS outage the test makes meanwhile: even apps run() in poll
//           mode, odd ones create and wait(). A create that throws is
//           retried by the app a second later, as an app would; a throw
//           after the create is a failure the test counts.
//
// Environment: POLLUX_URL, POLLUX_TOKEN, ROUTE (sim), MODEL (acme/video),
// CLIENTS (50), JOBS (200), READ_TOKEN, SLOW_TOKEN, KEY, LONG_MODEL,
// SHORT_MODEL, STOP, HOOK_DELAY_MS.
//
// Outputs stay URLs (useFileOutput: false): the simulated provider's
// https URLs name no real host, and run() would download each one.

import { existsSync } from "node:fs";
import http from "node:http";
import Replicate, { validateWebhook } from "replicate";
import { imageBytes, sha256 } from "./image.mjs";

const env = process.env;
const route = env.ROUTE ?? "sim";
const baseUrl = `${env.POLLUX_URL}/replicate/${route}/v1`;
const model = env.MODEL ?? "acme/video";
const version = "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa";

const client = (auth = env.POLLUX_TOKEN, extra = {}) =>
  new Replicate({ auth, baseUrl, useFileOutput: false, ...extra });
const print = (o) => console.log(JSON.stringify(o));

// runOne runs one job with run(), returning its id from the progress
// callback (run() itself returns only the output).
async function runOne(replicate, ref, input, wait) {
  let id;
  try {
    const output = await replicate.run(ref, { input, ...(wait ? { wait } : {}) }, (p) => {
      id = p.id;
    });
    return { id, status: "succeeded", output };
  } catch (err) {
    return { id, status: "failed", error: String(err.message ?? err) };
  }
}

// waitFor wait()s for a created prediction: its output, or the error
// wait() throws (a failed prediction's, or any other).
async function waitFor(replicate, created) {
  try {
    const done = await replicate.wait(created);
    return { id: created.id, status: done.status, output: done.output };
  } catch (err) {
    return { id: created.id, status: "failed", error: String(err.message ?? err) };
  }
}

// createAndWait creates a prediction and wait()s for it.
async function createAndWait(replicate, input) {
  const created = await replicate.predictions.create({ model, input });
  return { created: created.status, ...(await waitFor(replicate, created)) };
}

function apiError(step, err) {
  return {
    step,
    class: err?.constructor?.name,
    name: err?.name,
    status: err?.response?.status,
    retry_after: err?.response?.headers?.get?.("retry-after") ?? null,
    message: String(err?.message ?? err),
  };
}

async function main() {
  const replicate = client();
  print({ step: "run-block", ...(await runOne(replicate, model, { prompt: "a cat" })) });
  print({ step: "run-poll", ...(await runOne(replicate, `${model}:${version}`, { prompt: "a dog" }, { mode: "poll" })) });

  const created = await replicate.predictions.create({ model, input: { prompt: "a bird" } });
  const got = await replicate.predictions.get(created.id);
  print({ step: "create-get-wait", created: created.status, got: got.id, urls: created.urls, ...(await waitFor(replicate, got)) });

  const toCancel = await replicate.predictions.create({ model, input: { prompt: "a fish" } });
  const canceled = await replicate.predictions.cancel(toCancel.id);
  const after = await replicate.wait(canceled);
  print({ step: "cancel", id: toCancel.id, answered: canceled.status, status: after.status });
}

async function load() {
  const clients = Number(env.CLIENTS ?? 50);
  const jobs = Number(env.JOBS ?? 200);
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const replicate = client();
      while (next < jobs) {
        const n = next++;
        const r = c % 2 === 0
          ? await runOne(replicate, model, { prompt: `job ${n}` })
          : await createAndWait(replicate, { prompt: `job ${n}` });
        print({ step: "load", client: c, n, ...r });
      }
    }),
  );
}

// images: load, each job an image-to-video one with its own image
// (IMAGE_BYTES, seeded by the job's number), uploaded by the SDK.
async function images() {
  const clients = Number(env.CLIENTS ?? 50);
  const jobs = Number(env.JOBS ?? 200);
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const replicate = client();
      while (next < jobs) {
        const n = next++;
        const bytes = imageBytes(undefined, n + 1);
        const input = { prompt: `job ${n}`, image: bytes };
        const r = c % 2 === 0 ? await runOne(replicate, model, input) : await createAndWait(replicate, input);
        print({ step: "images", client: c, n, sha256: sha256(bytes), size: bytes.length, ...r });
      }
    }),
  );
}

async function errors() {
  const steps = [
    ["wrong-token", () => client("not-a-pollux-token-0123456789").predictions.create({ model, input: {} })],
    ["read-only-token", () => client(env.READ_TOKEN).predictions.create({ model, input: {} })],
    ["no-input", () => client().predictions.create({ model })],
    ["webhook", () => client().predictions.create({ model, input: {}, webhook: "http://app.example/hook" })],
    ["unknown-id", () => client().predictions.get("nosuchpredictionxxxxxxxxxx")],
    ["read-only-get", () => client(env.READ_TOKEN).predictions.get("nosuchpredictionxxxxxxxxxx")],
  ];
  for (const [step, call] of steps) {
    try {
      const v = await call();
      print({ step, unexpected: v });
    } catch (err) {
      print(apiError(step, err));
    }
  }
  // Over its quota: the SDK retries a 429 a few times within
  // milliseconds, ignoring Retry-After, then throws.
  const slow = client(env.SLOW_TOKEN);
  try {
    await Promise.all(Array.from({ length: 20 }, () => slow.predictions.get("nosuchpredictionxxxxxxxxxx").catch((err) => {
      if (err?.response?.status === 429) throw err;
    })));
    print({ step: "quota", unexpected: "no 429" });
  } catch (err) {
    print(apiError("quota", err));
  }
}

// retryingFetch is a fetch that sends every request with Idempotency-Key:
// key and retries one whose connection broke, for a minute; attempts()
// counts the tries.
function retryingFetch(key) {
  let attempts = 0;
  const f = async (url, init) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      attempts++;
      try {
        return await fetch(url, { ...init, headers: { ...init.headers, "Idempotency-Key": key } });
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };
  return { fetch: f, attempts: () => attempts };
}

// image: image-to-video through the SDK's default upload path.
async function image() {
  const bytes = imageBytes();
  const retrying = env.KEY ? retryingFetch(env.KEY) : null;
  const replicate = client(env.POLLUX_TOKEN, retrying ? { fetch: retrying.fetch } : {});
  const created = await replicate.predictions.create({ model, input: { prompt: "image to video", image: bytes } });
  const attempts = retrying?.attempts(); // the upload's and the create's
  const files = await replicate.files.list();
  print({ step: "image", sha256: sha256(bytes), size: bytes.length, attempts, input_image: created.input?.image,
    files: files.results.length, ...(await waitFor(replicate, created)) });
}

// keyed: a create the app makes safe to retry, by giving it a key.
async function keyed() {
  let attempts = 0;
  const retrying = async (url, init) => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      attempts++;
      try {
        return await fetch(url, { ...init, headers: { ...init.headers, "Idempotency-Key": env.KEY } });
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };
  const replicate = client(env.POLLUX_TOKEN, { fetch: retrying });
  const created = await replicate.predictions.create({ model, input: { prompt: "keyed" } });
  const creates = attempts;
  print({ step: "keyed", create_attempts: creates, created: created.status, ...(await waitFor(replicate, created)) });
}

async function keyless() {
  try {
    const p = await client().predictions.create({ model, input: { prompt: "keyless" } });
    print({ step: "keyless", unexpected: p });
  } catch (err) {
    print(apiError("keyless", err));
  }
}

async function list() {
  const replicate = client();
  let pages = 0;
  for await (const page of replicate.paginate(replicate.predictions.list)) {
    pages++;
    for (const p of page) print({ step: "list", id: p.id, status: p.status });
  }
  print({ step: "pages", pages });
}

async function outage() {
  const clients = Number(env.CLIENTS ?? 6);
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      const replicate = client();
      // job runs one job of model: run() in poll mode (even apps), or
      // create and wait() (odd ones). It resolves once the job is created,
      // with its id and done, its outcome; a create that throws rejects.
      const job = (model, input) =>
        new Promise((created, refused) => {
          let id;
          const made = (p) => {
            if (!id) {
              id = p.id;
              created({ id, done });
            }
          };
          const done = (async () => {
            try {
              if (c % 2 === 0) {
                await replicate.run(model, { input, wait: { mode: "poll" } }, made);
                return { status: "succeeded" };
              }
              const p = await replicate.predictions.create({ model, input });
              made(p);
              return { status: (await replicate.wait(p)).status };
            } catch (err) {
              if (!id) refused(err);
              return { status: "error", error: String(err.message ?? err) };
            }
          })();
        });
      const create = async (model, kind, n) => {
        for (let errors = 0; ; errors++) {
          try {
            return { ...(await job(model, { prompt: `${kind} ${c}-${n}` })), create_errors: errors };
          } catch (err) {
            if (errors >= 300) throw err;
            await sleep(1000);
          }
        }
      };
      const report = async (kind, j) =>
        print({ step: "outage", client: c, kind, id: j.id, create_errors: j.create_errors, ...(await j.done) });
      const jobs = [report("long", await create(env.LONG_MODEL, "long", 0))];
      for (let n = 1; !existsSync(env.STOP); n++) {
        jobs.push(report("short", await create(env.SHORT_MODEL, "short", n)));
        await sleep(1000);
      }
      await Promise.all(jobs);
    }),
  );
}

// webhooks creates JOBS predictions, each naming a webhook on a receiver
// of this app's own (on loopback) and a webhook_events_filter by turns:
// completed, start+completed, none (every event). Each delivery is
// checked with the SDK's validateWebhook() and the secret
// webhooks.default.secret.get() answers, and reported once the job's
// completed delivery came (or DEADLINE_S passed).
async function webhooks() {
  const replicate = client();
  const { key } = await replicate.webhooks.default.secret.get();
  const jobs = Number(env.JOBS ?? 30);
  const filters = [["completed"], ["start", "completed"], undefined];
  const done = new Set();
  let finish;
  const all = new Promise((resolve) => (finish = resolve));
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const n = Number(new URL(req.url, "http://x").searchParams.get("n"));
      let valid = false;
      try {
        valid = await validateWebhook({ headers: req.headers, body }, key);
      } catch (err) {
        valid = String(err.message ?? err);
      }
      let p = {};
      try {
        p = JSON.parse(body);
      } catch {}
      print({ step: "delivery", n, valid, webhook_id: req.headers["webhook-id"], id: p.id, status: p.status, output: p.output });
      setTimeout(() => res.writeHead(200).end(), Number(env.HOOK_DELAY_MS ?? 0));
      if (["succeeded", "failed", "canceled"].includes(p.status)) {
        done.add(n);
        if (done.size === jobs) finish();
      }
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const hook = `http://127.0.0.1:${server.address().port}/hook`;
  await Promise.all(
    Array.from({ length: jobs }, async (_, n) => {
      const filter = filters[n % filters.length];
      const p = await replicate.predictions.create({
        model, input: { prompt: `hook ${n}` }, webhook: `${hook}?n=${n}`,
        ...(filter ? { webhook_events_filter: filter } : {}),
      });
      print({ step: "created", n, id: p.id, filter: filter ?? null });
    }),
  );
  await Promise.race([all, new Promise((r) => setTimeout(r, Number(env.DEADLINE_S ?? 60) * 1000).unref())]);
  server.close();
}

const modes = { main, load, images, errors, image, keyed, keyless, list, outage, webhooks };
const mode = modes[process.argv[2] ?? env.MODE];
if (!mode) {
  console.error(`usage: node replicate.mjs ${Object.keys(modes).join("|")}`);
  process.exit(2);
}
await mode();
