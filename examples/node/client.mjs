// Pollux from Node.js, with nothing but the official NATS packages.
//
// It submits POLLUX_JOBS jobs to pollux.submit.<route>, each twice, follows
// every job's events from its first (pollux.events.<route>.<job>, replayed
// from the POLLUX_EVENTS stream, so it does not matter that the follower
// starts after the job did), and checks what the v1 contract promises:
//
//   - every job reaches a terminal state before POLLUX_TIMEOUT_S;
//   - a job's events arrive in seq order 1, 2, 3, ... (a republished
//     duplicate, a seq already seen, may be dropped);
//   - publishing a submission twice makes one job, whose id the client knew
//     before publishing: the id it gave, or the one derived from its
//     idempotency key;
//   - each job has exactly one terminal event.
//
// It exits 0 when all hold, 1 when any does not, 2 on a usage or
// connection error.
//
//   NATS_URL=nats://127.0.0.1:4222 node client.mjs
//
// Environment: NATS_URL (default nats://127.0.0.1:4222), POLLUX_ROUTE (sim),
// POLLUX_MODEL (pollux-demo/preview), POLLUX_JOBS (10), POLLUX_TIMEOUT_S
// (120), POLLUX_PREFIX (pollux).

import { createHash, randomBytes } from "node:crypto";
import { connect } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream } from "@nats-io/jetstream";

const env = process.env;
const natsURL = env.NATS_URL ?? "nats://127.0.0.1:4222";
const prefix = env.POLLUX_PREFIX ?? "pollux";
const route = env.POLLUX_ROUTE ?? "sim";
const model = env.POLLUX_MODEL ?? "pollux-demo/preview";
const jobCount = Number(env.POLLUX_JOBS ?? 10);
const timeoutS = Number(env.POLLUX_TIMEOUT_S ?? 120);
const eventsStream = `${prefix.toUpperCase().replaceAll("-", "_")}_EVENTS`;
const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired", "lost"]);

if (!Number.isInteger(jobCount) || jobCount < 1 || !(timeoutS > 0)) {
  console.error("POLLUX_JOBS must be a positive integer and POLLUX_TIMEOUT_S a positive number");
  process.exit(2);
}

// keyID is the job id Pollux derives from an idempotency key: "k-" and the
// first 26 characters of the unpadded lowercase base32 of
// SHA-256(route, a zero byte, key). The same key on the same route is the
// same job.
export function keyID(route, key) {
  const sum = createHash("sha256").update(route).update(Buffer.of(0)).update(key).digest();
  return "k-" + base32(sum).slice(0, 26);
}

function base32(bytes) {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  let out = "";
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

const problems = [];
const fail = (msg) => problems.push(msg);

// follow reads a job's events from its first until its terminal event and
// checks their order. It returns the terminal state.
async function follow(js, id, deadline) {
  const consumer = await js.consumers.get(eventsStream, {
    filter_subjects: [`${prefix}.events.${route}.${id}`],
    deliver_policy: DeliverPolicy.All,
  });
  const messages = await consumer.consume();
  const stop = setTimeout(() => messages.stop(), deadline - Date.now());
  let last = 0;
  try {
    for await (const m of messages) {
      const ev = m.json();
      if (ev.v !== 1 || ev.job_id !== id || ev.route !== route) {
        fail(`job ${id}: event ${m.seq} is not a v1 event of this job: ${m.string()}`);
        return undefined;
      }
      if (ev.type === "rejected") {
        fail(`job ${id}: rejected: ${ev.rejection?.error}`);
        return undefined;
      }
      if (ev.seq <= last) continue; // a republished duplicate
      if (ev.seq !== last + 1) {
        fail(`job ${id}: event seq ${ev.seq} after ${last}: out of order or missing`);
        return undefined;
      }
      last = ev.seq;
      if (ev.job?.id !== id || ev.job?.state !== ev.state) {
        fail(`job ${id}: event ${ev.seq} carries a snapshot of another job or state`);
      }
      if (TERMINAL.has(ev.type)) {
        if (ev.state !== ev.type) fail(`job ${id}: ${ev.type} event in state ${ev.state}`);
        return ev.state;
      }
    }
    fail(`job ${id}: not terminal after ${timeoutS}s (last event seq ${last})`);
    return undefined;
  } finally {
    clearTimeout(stop);
    messages.stop();
  }
}

// runEvents replays every event of the route since start and returns the
// terminal events of this run's jobs by job id.
async function runEvents(js, run, start) {
  const consumer = await js.consumers.get(eventsStream, {
    filter_subjects: [`${prefix}.events.${route}.*`],
    deliver_policy: DeliverPolicy.StartTime,
    opt_start_time: start.toISOString(),
  });
  const terminal = new Map();
  const messages = await consumer.consume();
  const stop = setTimeout(() => messages.stop(), 30_000);
  try {
    for await (const m of messages) {
      const ev = m.json();
      if (ev.job?.metadata?.run === run && TERMINAL.has(ev.type)) {
        terminal.set(ev.job_id, [...(terminal.get(ev.job_id) ?? []), ev.type]);
      }
      if (m.info.pending === 0) break;
    }
  } finally {
    clearTimeout(stop);
    messages.stop();
  }
  return terminal;
}

async function main() {
  let nc;
  try {
    nc = await connect({ servers: natsURL, name: "pollux-example-node" });
  } catch (err) {
    console.error(`cannot connect to NATS at ${natsURL}: ${err.message}`);
    return 2;
  }
  try {
    const js = jetstream(nc);
    const run = randomBytes(4).toString("hex");
    const start = new Date(Date.now() - 1000); // the server's clock may lag ours a little
    const deadline = Date.now() + timeoutS * 1000;

    // Half the jobs name their id, half give an idempotency key; either way
    // the id is known before anything is published.
    const jobs = [];
    for (let i = 0; i < jobCount; i++) {
      const msg = { v: 1, model, input: { prompt: `clip ${i} of run ${run}` }, timeout_s: 600, metadata: { run, i: String(i) } };
      let id;
      if (i % 2 === 0) {
        id = msg.id = `node-${run}-${i}`;
      } else {
        msg.idempotency_key = `node-${run}-${i}`;
        id = keyID(route, msg.idempotency_key);
      }
      jobs.push({ id, msg });
    }
    // Publish each twice: the second must not make another job. A
    // JetStream publish returns once the intake stream has stored it.
    for (const pass of [1, 2]) {
      for (const { msg } of jobs) {
        await js.publish(`${prefix}.submit.${route}`, JSON.stringify(msg));
      }
      if (pass === 1) console.log(`published ${jobs.length} submissions to ${prefix}.submit.${route}, and each again`);
    }

    const states = await Promise.all(jobs.map(({ id }) => follow(js, id, deadline)));
    const counts = {};
    for (const s of states) if (s) counts[s] = (counts[s] ?? 0) + 1;

    const terminal = await runEvents(js, run, start);
    for (const { id } of jobs) {
      const t = terminal.get(id) ?? [];
      if (t.length !== 1) fail(`job ${id}: ${t.length} terminal events (${t.join(", ")}), want 1`);
    }
    for (const id of terminal.keys()) {
      if (!jobs.some((j) => j.id === id)) fail(`job ${id} is of this run but was never submitted under that id: a second job`);
    }

    const summary = Object.entries(counts).map(([s, n]) => `${s} ${n}`).join(" · ");
    if (problems.length > 0) {
      for (const p of problems) console.error(`FAIL ${p}`);
      console.error(`${problems.length} problem(s); finished jobs: ${summary || "none"}`);
      return 1;
    }
    console.log(`ok: ${jobs.length} jobs, each submitted twice and made once, followed from the first event to the terminal one in order: ${summary}`);
    return 0;
  } finally {
    await nc.close();
  }
}

process.exitCode = await main();
