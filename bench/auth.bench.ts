import https from "node:https";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { startServer } from "../test/helpers/server.ts";
import { median, type BenchRow } from "./bench-row.ts";

const RUNS = 5;
const LATENCY_REQUESTS = 200;
const THROUGHPUT_REQUESTS = 600;
const CONCURRENCY = 16;

type Get = () => Promise<void>;

/** p50 latency in ms of sequential requests on one keep-alive connection, timed with hrtime. */
async function latencyP50(get: Get): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < LATENCY_REQUESTS; i++) {
    const started = process.hrtime.bigint();
    await get();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  return median(times);
}

/** Requests per second with CONCURRENCY requests in flight. */
async function throughput(get: Get): Promise<number> {
  let left = THROUGHPUT_REQUESTS;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await get();
    }),
  );
  return THROUGHPUT_REQUESTS / (Number(process.hrtime.bigint() - started) / 1e9);
}

function getter(url: string, agent: Agent, headers: Record<string, string>): Get {
  return async () => {
    const res = await fetch(url, { headers, dispatcher: agent } as RequestInit);
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    await res.arrayBuffer();
  };
}

/**
 * Authenticated GET /v1/models (auth: format + HMAC + key lookup, IP allowlist, rate limiter, Fastify) against a bare
 * node:https server answering the same JSON with the same certificate, measured alternately in the same run.
 */
export default async function authBench(): Promise<BenchRow[]> {
  const srv = await startServer({
    logLevel: "error",
    models: [
      { id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" },
      { id: "bench-embed", engine: "llama", source: "/nonexistent/bench-embed.gguf", capabilities: ["embeddings"], load: "lazy" },
    ],
    plans: { bench: { rateLimit: { requests: 1_000_000_000, window: "1h" } } },
  });
  const { key } = await srv.createKey({ plan: "bench" });
  const serviceUrl = `${srv.baseURL}/models`;
  const headers = { authorization: `Bearer ${key}` };
  const body = await (await srv.fetch(serviceUrl, { headers })).text();

  const bare = https.createServer({ cert: srv.server.tls.cert, key: srv.server.tls.key }, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
  const bareUrl = `https://127.0.0.1:${(bare.address() as AddressInfo).port}/v1/models`;

  const one = new Agent({ connect: { ca: srv.ca }, connections: 1, pipelining: 1 });
  const many = new Agent({ connect: { ca: srv.ca }, connections: CONCURRENCY, pipelining: 1 });
  const latency = { service: [] as number[], raw: [] as number[], publicRoute: [] as number[] };
  const rps = { service: [] as number[], raw: [] as number[] };
  try {
    // Warm both paths (TLS sessions, JIT, key cache).
    for (const get of [getter(serviceUrl, many, headers), getter(bareUrl, many, {})]) await throughput(get);
    for (let run = 0; run < RUNS; run++) {
      latency.service.push(await latencyP50(getter(serviceUrl, one, headers)));
      latency.raw.push(await latencyP50(getter(bareUrl, one, {})));
      latency.publicRoute.push(await latencyP50(getter(`${srv.origin}/healthz`, one, {})));
      rps.service.push(await throughput(getter(serviceUrl, many, headers)));
      rps.raw.push(await throughput(getter(bareUrl, many, {})));
    }
  } finally {
    await one.close();
    await many.close();
    await new Promise((resolve) => bare.close(resolve));
    await srv.close();
  }
  const p50Service = median(latency.service);
  const p50Raw = median(latency.raw);
  const p50Public = median(latency.publicRoute);
  const rpsService = median(rps.service);
  const rpsRaw = median(rps.raw);
  return [
    {
      item: "auth GET /v1/models p50 latency (ratio column = added ms)",
      service: p50Service,
      raw: p50Raw,
      unit: "ms",
      ratio: p50Service - p50Raw,
      target: "added <= 0.5 ms",
    },
    {
      item: "split: /v1/models (auth+limits) vs public /healthz, same Fastify (ratio = added ms)",
      service: p50Service,
      raw: p50Public,
      unit: "ms",
      ratio: p50Service - p50Public,
      target: "diagnostic",
    },
    {
      item: `auth GET /v1/models throughput (${CONCURRENCY} in flight)`,
      service: rpsService,
      raw: rpsRaw,
      unit: "req/s",
      ratio: rpsService / rpsRaw,
      target: ">= 0.7x bare",
    },
  ];
}
