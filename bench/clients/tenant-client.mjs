// One tenant of the noisy-neighbour bench (bench/tenants.bench.ts), in its own process.
// `node tenant-client.mjs flood URL BODY_JSON SECONDS KEY CA_FILE CONNECTIONS [MARGIN_MS]`: CONNECTIONS loops, each
//   sending the next request as soon as the last one ended (after a 503 or 429, once its Retry-After has passed, as
//   the openai client does), for SECONDS; perSecond counts only the
//   answers that ended between MARGIN_MS after the start and MARGIN_MS before the end.
// `node tenant-client.mjs paced URL BODY_JSON SECONDS KEY CA_FILE EVERY_MS`: one request every EVERY_MS, whether or
//   not the earlier ones ended (open loop), for SECONDS; then waits for them.
// Prints {ok, refused, other, perSecond, latencies} as JSON: ok = 200 with the whole body read, refused = 503,
// perSecond = ok ÷ SECONDS, latencies (ms) of the answered requests.
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [mode, url, body, seconds, key, caFile, arg, marginArg] = process.argv.slice(2);
const margin = Number(marginArg ?? 0);
const n = Number(arg);
const dispatcher = new Agent({ connections: mode === "flood" ? n : 64, connect: { ca: readFileSync(caFile, "utf8") }, headersTimeout: 120_000, bodyTimeout: 120_000 });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
const tally = { ok: 0, refused: 0, other: 0, codes: {} };
const latencies = [];
const start = performance.now();
const end = start + Number(seconds) * 1000;
let counted = 0;

async function once() {
  const t0 = performance.now();
  try {
    const res = await request(url, { method: "POST", headers, body, dispatcher });
    await res.body.arrayBuffer();
    if (res.statusCode === 200) {
      tally.ok++;
      const at = performance.now();
      if (at >= start + margin && at <= end - margin) counted++;
      latencies.push(performance.now() - t0);
    } else if (res.statusCode === 503 || res.statusCode === 429) {
      tally.refused++;
      if (mode === "flood") await new Promise((r) => setTimeout(r, Math.max(0, Math.min(end - performance.now(), Number(res.headers["retry-after"] ?? 1) * 1000))));
    } else {
      tally.other++;
      tally.codes[res.statusCode] = (tally.codes[res.statusCode] ?? 0) + 1;
    }
  } catch {
    tally.other++;
  }
}

if (mode === "flood") {
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (performance.now() < end) await once();
    }),
  );
} else {
  const sent = [];
  for (let at = performance.now(); at < end; at += n) {
    await new Promise((r) => setTimeout(r, Math.max(0, at - performance.now())));
    sent.push(once());
  }
  await Promise.all(sent);
}
console.log(JSON.stringify({ ...tally, perSecond: mode === "flood" ? counted / (Number(seconds) - (2 * margin) / 1000) : tally.ok / Number(seconds), latencies }));
await dispatcher.close();
