import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startListening, type Peer } from "../harness/peers.ts";
import { modelsDir, repoRoot, spawnServer, tempDir, type SpawnedServer } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 31, the noisy neighbour. Account A floods a model with 40 concurrent connections (its own process) while
 * account B sends one request every 250 ms (its own process), on two models:
 * - `pool`: an upstream pool (parallel 4) whose upstream (harness/paced-upstream.mjs, its own process) streams a
 *   completion over 200 ms ± 25%;
 * - `tiny`: stories260K in-process (parallel 4), 48 tokens per answer.
 * Each run measures, per model: A alone (the model's capacity, completions per second); B alone; both; and, 11 s
 * after B's last request, A alone again (the capacity is the mean of the two A-alone phases); and, from the server's
 * access log (queueMs), how long B's requests waited for a slot alone and under the flood (issue 42.5). It does so
 * on this tree's scheduler and on the scheduler before issue 31 (the commit BENCH_BASELINE_REF, default the parent
 * of the fair-share work, extracted with `git archive` into a temporary folder and run from there with this tree's
 * node_modules), alternating which goes first. Medians of RUNS, min–max over the runs.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = Number(process.env.BENCH_TENANT_SECONDS ?? 6);
const BASELINE_REF = process.env.BENCH_BASELINE_REF ?? "7a99101";
const client = path.join(repoRoot, "bench/clients/tenant-client.mjs");

interface Tally {
  ok: number;
  refused: number;
  other: number;
  perSecond: number;
  latencies: number[];
}

interface Sample {
  bRefused: number;
  bSent: number;
  /** B's p95 under A's flood ÷ B's p95 alone; a refused request counts as infinitely slow. */
  p95Ratio: number;
  p95Alone: number;
  p95Flood: number;
  /** A's completions per second while B sends ÷ (capacity − B's completions per second). */
  aShare: number;
  /** B's waits for a slot (the access log's queueMs; none from a scheduler that does not log it), p95, ms. */
  bWaitAlone: number;
  bWaitFlood: number;
  detail?: Record<string, unknown>;
}

function p95(t: Tally): number {
  const all = [...t.latencies, ...Array<number>(t.refused + t.other).fill(Infinity)].sort((a, b) => a - b);
  return all[Math.min(all.length - 1, Math.floor(0.95 * all.length))];
}

/** The source tree at `ref`, with this tree's node_modules (the dependencies did not change). */
function baselineTree(ref: string): string {
  const dir = tempDir("bench-tenants-baseline-");
  execFileSync("sh", ["-c", `git -C '${repoRoot}' archive '${ref}' | tar -x -C '${dir}'`]);
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
  return dir;
}

/** The queueMs of one account's access-log lines that the server wrote since `from` (an index into its stderr). */
function queueWaits(gateway: SpawnedServer, from: number, account: string): number[] {
  const waits: number[] = [];
  for (const line of gateway.stderr.slice(from).join("").split("\n")) {
    if (!line.includes(account) || !line.includes('"queueMs"')) continue;
    const record = JSON.parse(line) as { msg?: string; account?: string; queueMs?: number };
    if (record.msg === "request" && record.account === account && record.queueMs !== undefined) waits.push(record.queueMs);
  }
  return waits;
}

async function scenario(gateway: SpawnedServer, keys: { a: string; b: string; bAccount: string }, ca: string, model: string, body: string): Promise<Sample> {
  const url = `${gateway.origin}/v1/chat/completions`;
  const run = async (mode: "flood" | "paced", key: string, seconds: number, arg: number, margin = 0) =>
    JSON.parse(await runNode([client, mode, url, body, String(seconds), key, ca, String(arg), String(margin)])) as Tally;
  const waitP95 = (waits: number[]) => p95({ ok: waits.length, refused: 0, other: 0, perSecond: 0, latencies: waits });
  // A alone measures the whole capacity only while B has not sent for 10 s (the scheduler's light-account reserve
  // holds a slot for it meanwhile): first, and after a pause.
  const before = await run("flood", keys.a, SECONDS + 2, 40, 1000);
  let mark = gateway.stderr.length;
  const alone = await run("paced", keys.b, SECONDS, 250);
  const waitsAlone = queueWaits(gateway, mark, keys.bAccount);
  const flood = run("flood", keys.a, SECONDS + 2, 40, 1000);
  await new Promise((r) => setTimeout(r, 1000));
  mark = gateway.stderr.length;
  const b = await run("paced", keys.b, SECONDS, 250);
  const waitsFlood = queueWaits(gateway, mark, keys.bAccount);
  const a = await flood;
  await new Promise((r) => setTimeout(r, 11_000));
  const after = await run("flood", keys.a, SECONDS + 2, 40, 1000);
  // The capacity: A alone, just before and just after (the machine's load drifts between phases).
  const capacity = { perSecond: (before.perSecond + after.perSecond) / 2, refused: before.refused + after.refused };
  const left = capacity.perSecond - b.perSecond;
  return {
    bRefused: b.refused + b.other,
    bSent: b.ok + b.refused + b.other,
    p95Alone: p95(alone),
    p95Flood: p95(b),
    p95Ratio: p95(b) / p95(alone),
    aShare: a.perSecond / left,
    bWaitAlone: waitP95(waitsAlone),
    bWaitFlood: waitP95(waitsFlood),
    detail: { capacity: capacity.perSecond, capacityRefused: capacity.refused, a: a.perSecond, aRefused: a.refused, b: b.perSecond, bLatencies: b.latencies.map(Math.round).sort((x, y) => x - y) },
  };
}

export default async function tenantsBench(): Promise<BenchRow[]> {
  const upstream: Peer = await startListening(path.join(repoRoot, "harness/paced-upstream.mjs"), ["0", "200", "0.25"]);
  const raw = (dir: string) => ({
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [
      { id: "pool", engine: "upstream", capabilities: ["chat"], parallel: 4, upstreams: [{ url: `http://127.0.0.1:${upstream.port}/v1`, model: "paced", maxInFlight: 4 }] },
      { id: "tiny", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 4, threads: 1 },
    ],
  });
  const baseline = baselineTree(BASELINE_REF);
  const schedulers = { fair: path.join(repoRoot, "bin/modelgate.js"), baseline: path.join(baseline, "bin/modelgate.js") };
  const bodies = {
    pool: JSON.stringify({ model: "pool", stream: true, messages: [{ role: "user", content: "Once upon a time" }] }),
    tiny: JSON.stringify({ model: "tiny", stream: true, max_tokens: 48, temperature: 0, messages: [{ role: "user", content: "Once upon a time" }] }),
  };
  const samples: Record<"fair" | "baseline", Record<"pool" | "tiny", Sample[]>> = { fair: { pool: [], tiny: [] }, baseline: { pool: [], tiny: [] } };
  try {
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      const order = i % 2 === 0 ? (["fair", "baseline"] as const) : (["baseline", "fair"] as const);
      for (const which of order.filter((w) => !process.env.BENCH_TENANT_ONLY || w === process.env.BENCH_TENANT_ONLY)) {
        const dir = tempDir(`bench-tenants-${which}-`);
        mkdirSync(dir, { recursive: true });
        const config = raw(dir);
        const gateway = await spawnServer(config, dir, [], {}, schedulers[which]);
        try {
          const ca = path.join(dir, "tls/cert.pem");
          const cfg = testConfig(config, path.join(dir, "config.yaml"));
          const b = await createKey(cfg);
          const keys = { a: (await createKey(cfg)).key, b: b.key, bAccount: b.accountId };
          for (const model of (["pool", "tiny"] as const).filter((m) => !process.env.BENCH_TENANT_MODEL || m === process.env.BENCH_TENANT_MODEL)) {
            const sample = await scenario(gateway, keys, ca, model, bodies[model]);
            process.stderr.write(`    ${which} ${model}: ${JSON.stringify(sample)}\n`);
            samples[which][model].push(sample);
          }
        } finally {
          await gateway.stop();
          rmSync(dir, { recursive: true, force: true });
        }
      }
    }
  } finally {
    upstream.child.kill();
    // The node_modules link is removed, not followed.
    rmSync(baseline, { recursive: true, force: true });
  }
  const rows: BenchRow[] = [];
  for (const model of ["pool", "tiny"] as const) {
    const label = model === "pool" ? "tenants, upstream 200 ms ± 25%, parallel 4" : "tenants, stories260K in-process, parallel 4";
    const fair = samples.fair[model];
    const old = samples.baseline[model];
    const refused = (s: Sample[]) => s.reduce((n, x) => n + x.bRefused, 0);
    const sent = (s: Sample[]) => s.reduce((n, x) => n + x.bSent, 0);
    rows.push(
      ratioRow({ item: `${label}: B's 503s while A floods, of ${sent(fair)} sent over ${RUNS} runs (raw = old scheduler, of ${sent(old)})`, service: refused(fair), raw: refused(old), ratios: [refused(fair)], unit: "requests", target: "0" }),
      ratioRow({ item: `${label}: B's p95 while A floods ÷ B's p95 alone, refused = ∞ (raw = old scheduler)`, service: fair.map((s) => s.p95Ratio), raw: old.map((s) => s.p95Ratio), ratios: fair.map((s) => s.p95Ratio), unit: "×", target: "≤ 1.5" }),
      ratioRow({ item: `${label}: B's p95 while A floods (service) and alone (raw), ms`, service: fair.map((s) => s.p95Flood), raw: fair.map((s) => s.p95Alone), ratios: fair.map((s) => s.p95Ratio), unit: "ms", target: "report" }),
      ratioRow({
        item: `${label}: B's p95 wait for a slot (the access log's queueMs) while A floods (service) and alone (raw); ratio column: the flood's, ms`,
        service: fair.map((s) => s.bWaitFlood),
        raw: fair.map((s) => s.bWaitAlone),
        ratios: fair.map((s) => s.bWaitFlood),
        unit: "ms",
        target: "report",
      }),
      ratioRow({ item: `${label}: A's completions ÷ the capacity B leaves (raw = old scheduler)`, service: fair.map((s) => s.aShare), raw: old.map((s) => s.aShare), ratios: fair.map((s) => s.aShare), unit: "share", target: "≥ 0.9" }),
    );
  }
  return rows;
}
