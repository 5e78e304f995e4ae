import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { createKey, freshPostgres, redisTestUrl } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir, type SpawnedServer } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { benchRateLimit, runNode, startPeer } from "./processes.ts";

/**
 * Issue 32: token limits exact across replicas. Three `modelgate serve` processes share PostgreSQL and Redis in
 * front of a sized upstream (bench/peers/sized-upstream.mjs: usage follows the request); 200 concurrent clients
 * in another process (bench/clients/token-client.mjs) send chat requests of mixed sizes against one key of
 * 20,000 tokens per minute for 55 s, inside its first window. Each run uses a fresh key (a fresh window): the
 * tokens admitted (the answers' usage, and the key's counter in Redis) must stay ≤ 20,000 and use ≥ 90% of it.
 * Then the added p50 latency of the token check: sequential requests on one connection (latency-client.mjs) for
 * a key whose plan has a token limit against one whose plan has only the request limit, alternated, RUNS rounds.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const LIMIT = 20_000;
const CLIENTS = 200;
const SECONDS = 55;
const LATENCY_SECONDS = 5;

export default async function tokensBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-tokens-");
  const db = await freshPostgres();
  const upstream = await startPeer("sized-upstream.mjs");
  const raw = {
    dataDir: dir,
    logLevel: "warn",
    database: { url: db.url },
    redis: { url: redisTestUrl },
    keySecret: `bench-tokens-${randomBytes(16).toString("hex")}`,
    plans: {
      metered: { rateLimit: benchRateLimit, tokenLimit: { tokens: LIMIT, window: "1m" } },
      unmetered: { rateLimit: benchRateLimit },
      wide: { rateLimit: benchRateLimit, tokenLimit: { tokens: 1_000_000_000, window: "1m" } },
    },
    models: [{ id: "sized", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${upstream.port}/v1`, model: "sized" }], tokenize: "none", parallel: 256, queueSize: 4096 }],
  };
  const replicas: SpawnedServer[] = [];
  const redis = new Redis(redisTestUrl);
  const config = testConfig(raw, path.join(dir, "config.yaml"));
  try {
    // One after the other: the first start writes the shared self-signed certificate.
    for (let i = 0; i < 3; i++) replicas.push(await spawnServer(raw, dir));
    const origins = replicas.map((r) => r.origin).join(",");
    const ca = path.join(dir, "tls/cert.pem");
    readFileSync(ca);

    const admitted: number[] = [];
    const counted: number[] = [];
    const refusedRatio: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { key, id } = await createKey(config, { plan: "metered" });
      process.stderr.write(`  saturation run ${i + 1}/${RUNS} (load ${loadavg()[0].toFixed(1)})\n`);
      const out = JSON.parse(await runNode([path.join(import.meta.dirname, "clients/token-client.mjs"), origins, key, ca, String(CLIENTS), String(SECONDS), "sized"])) as {
        admittedTokens: number;
        admitted: number;
        refused: number;
        failed: number;
      };
      const used = Number((await redis.hget(`modelgate:tok:k:${id}:60000`, "u")) ?? 0);
      // A circuit opened by Redis timeouts counts per replica meanwhile (redis.onError: open): say so when it happened.
      const opened = (r: (typeof replicas)[number]) => r.stderr.join("").split("\n").filter((l) => l.includes("are counted per replica until it returns"));
      process.stderr.write(`    ${JSON.stringify(out)}; the key's counter in Redis: ${used}; limits' circuit opened (per replica): ${replicas.map((r) => opened(r).length).join(",")}\n`);
      const why = replicas.flatMap(opened).slice(0, 2);
      if (why.length) process.stderr.write(`    ${why.join("\n    ")}\n`);
      if (out.failed > 0) throw new Error(`${out.failed} requests failed`);
      admitted.push(out.admittedTokens);
      counted.push(used);
      refusedRatio.push(out.refused / (out.refused + out.admitted));
    }

    const latency = { tokens: [] as number[], requests: [] as number[] };
    const tokenKey = (await createKey(config, { plan: "wide" })).key;
    const requestKey = (await createKey(config, { plan: "unmetered" })).key;
    const url = `${replicas[0].origin}/v1/chat/completions`;
    const body = JSON.stringify({ model: "sized", messages: [{ role: "user", content: "Once upon a time there was a little girl." }], max_tokens: 32 });
    const p50 = async (key: string) => (JSON.parse(await runNode([path.join(import.meta.dirname, "clients/latency-client.mjs"), url, body, String(LATENCY_SECONDS), key, ca])) as { p50: number }).p50;
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  latency run ${i + 1}/${RUNS} (load ${loadavg()[0].toFixed(1)})\n`);
      for (const side of i % 2 === 0 ? (["tokens", "requests"] as const) : (["requests", "tokens"] as const)) {
        latency[side].push(await p50(side === "tokens" ? tokenKey : requestKey));
      }
    }
    const most = Math.max(...admitted, ...counted);
    process.stderr.write(`  admitted ${JSON.stringify(admitted)}, counters ${JSON.stringify(counted)}, refused share ${JSON.stringify(refusedRatio.map((r) => r.toFixed(2)))}, load ${loadavg().map((l) => l.toFixed(1)).join(" ")}\n`);
    return [
      ratioRow({
        item: `tokens: max tokens admitted in a window over the limit (3 replicas, PostgreSQL + Redis, ${CLIENTS} clients, ${LIMIT} tokens/min)`,
        service: most,
        raw: LIMIT,
        ratios: [most - LIMIT],
        unit: "tokens",
        target: "<= 0 over",
      }),
      ratioRow({
        item: "tokens: share of the limit used in the window (the answers' usage / limit)",
        service: admitted,
        raw: LIMIT,
        ratios: admitted.map((a) => a / LIMIT),
        unit: "tokens",
        target: ">= 0.9",
      }),
      ratioRow({
        item: "tokens: added p50 latency of the token check vs the request-only limiter (Redis, sequential, one connection)",
        service: latency.tokens,
        raw: latency.requests,
        ratios: latency.tokens.map((t, i) => t - latency.requests[i]),
        unit: "ms p50",
        target: "report",
      }),
    ];
  } finally {
    redis.disconnect();
    for (const r of replicas) await r.stop();
    upstream.child.kill();
    await db.drop();
  }
}
