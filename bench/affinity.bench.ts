import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, spread, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 34: prefix-affinity routing against least-outstanding and round-robin on the same pool, in the same run.
 * Three llama-server processes (SmolLM2-135M-shaped GGUF, -np 2, 1 thread each, their prompt cache capped at
 * 1 GiB), one Modelgate gateway (its own process) with one model per routing over the same three upstreams, and
 * bench/clients/conversations-client.mjs (its own process): 12 conversations × 4 turns, interleaved in rounds
 * with the arrival order rotated, 6 requests at a time (the pool's slots). Each run runs the three sides in a
 * rotated order, each on fresh documents; figures are medians over RUNS runs, the ratios' min–max alongside.
 * Prompt tokens evaluated are llama-server's own `llamacpp:prompt_tokens_total`.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const sides = ["affine", "least", "rr"] as const;
type Side = (typeof sides)[number];
const routing: Record<Side, string> = { affine: "prefix-affinity", least: "least-outstanding", rr: "round-robin" };

interface Outcome {
  ttftLaterP50: number;
  evaluatedLater: number;
  cachedLater: number;
  minimumLater: number;
  tokensPerSecond: number;
  requests: number[];
  busiestShare: number;
  firstPrompt: number;
  lastPrompt: number;
  wallMs: number;
}

export default async function affinityBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-affinity-");
  const upstreams = await Promise.all([0, 1, 2].map(() => startLlamaServer(shapedModel(), ["-c", "4096", "-np", "2", "-t", "1", "--metrics", "--cache-ram", "1024"])));
  const adminToken = "Bx5Nm9Qw3Er7Ty1Ui6Op0As4Df8Gh2Jk";
  // The same for every side: on a loaded 2-core machine a turn queued behind two others on an upstream can wait
  // longer than the default 30 s between events, which would end the run, not measure the routing.
  const timeouts = { firstByte: "10m", idle: "10m", total: "30m" };
  const raw = {
    dataDir: dir,
    adminToken,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: sides.map((id) => ({ id, engine: "upstream", capabilities: ["chat"], upstreams: upstreams.map((u) => ({ url: `${u.origin}/v1`, model: "shaped" })), routing: routing[id], timeouts })),
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const results: Record<Side, Outcome[]> = { affine: [], least: [], rr: [] };
  let affinity = { placements: 0, spills: 0, retries: 0, hitRatio: null as number | null };
  try {
    for (let i = 0; i < RUNS; i++) {
      const order = [...sides.slice(i % 3), ...sides.slice(0, i % 3)];
      for (const side of order) {
        const seed = String(i * 10 + sides.indexOf(side) + 1);
        const args = [path.join(import.meta.dirname, "clients/conversations-client.mjs"), `${gateway.origin}/v1/chat/completions`, side, seed, key, ca, upstreams.map((u) => u.origin).join(",")];
        const outcome = JSON.parse(await runNode(args)) as Outcome;
        process.stderr.write(`  run ${i + 1}/${RUNS} ${side} (load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}): ${JSON.stringify(outcome)}\n`);
        results[side].push(outcome);
      }
    }
    const { fetch: tlsFetch, agent } = trustingFetch(readFileSync(ca, "utf8"));
    const res = await tlsFetch(`${gateway.origin}/admin/v1/models/affine`, { headers: { authorization: `Bearer ${adminToken}` } });
    affinity = ((await res.json()) as { affinity: typeof affinity }).affinity;
    await agent.close();
  } finally {
    await gateway.stop();
    await Promise.all(upstreams.map((u) => u.stop()));
  }

  const runs = (side: Side, field: keyof Outcome) => results[side].map((o) => o[field] as number);
  const median = (side: Side, field: keyof Outcome) => spread(runs(side, field)).median;
  const versus = (other: Side, item: string, field: keyof Outcome, unit: string, target: string): BenchRow =>
    ratioRow({ item, service: runs("affine", field), raw: runs(other, field), unit, target });
  const rows: BenchRow[] = [];
  for (const [other, name, strict] of [["least", "least-outstanding", true], ["rr", "round-robin", false]] as const) {
    rows.push(
      versus(other, `affinity vs ${name}: p50 TTFT of turns 2–4`, "ttftLaterP50", "ms", strict ? "<= 0.35" : "report"),
      versus(other, `affinity vs ${name}: prompt tokens evaluated by the upstreams in turns 2–4`, "evaluatedLater", "tokens", strict ? "<= 0.5" : "report"),
      versus(other, `affinity vs ${name}: total tokens/s (prompt + completion)`, "tokensPerSecond", "tok/s", strict ? ">= 1.0" : "report"),
    );
  }
  for (const side of sides) {
    const shares = runs(side, "busiestShare");
    rows.push(ratioRow({ item: `${routing[side]}: busiest upstream's share of requests vs the mean`, service: shares, raw: 1, ratios: shares, unit: "×", target: side === "affine" ? "<= 1.5" : "report" }));
  }
  rows.push(
    ratioRow({
      item: `affinity: evaluated in turns 2–4 vs only their new tokens (prompts ${median("affine", "firstPrompt")}→${median("affine", "lastPrompt")} tokens)`,
      service: runs("affine", "evaluatedLater"),
      raw: runs("affine", "minimumLater"),
      unit: "tokens",
      target: "report",
    }),
    ratioRow({ item: `affinity: placed on their ring owner (${affinity.spills} spills of ${affinity.placements}, all runs)`, service: affinity.placements - affinity.spills, raw: affinity.placements, ratios: [affinity.hitRatio ?? 0], unit: "requests", target: "report" }),
  );
  return rows;
}
