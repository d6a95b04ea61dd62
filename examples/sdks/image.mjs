// A deterministic test image for the SDK scripts' image modes: a PNG
// signature, then IMAGE_BYTES (default 5 MB) bytes in all of a seeded
// xorshift stream, and its hex SHA-256, which each script prints so the
// test compares it with what the simulated provider received.
import { createHash } from "node:crypto";

export function imageBytes(n = Number(process.env.IMAGE_BYTES ?? 5_000_000), seed = Number(process.env.IMAGE_SEED ?? 7)) {
  const b = Buffer.alloc(n);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(b);
  let x = (seed >>> 0) || 1;
  for (let i = 8; i < n; i++) {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

export const sha256 = (b) => createHash("sha256").update(b).digest("hex");
