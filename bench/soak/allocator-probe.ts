// `node --import tsx bench/soak/allocator-probe.ts` (it compiles the tree first): issue 47's question after the
// thirteenth hour, which kind of the soak's activity grows jemalloc's `allocated` (memory the process asked malloc
// for and still holds). The soak's own topology (startTopology: its config, PostgreSQL and Redis behind its proxies,
// its llama-servers, the canned and the faulty upstream) with ONE replica kept (the second is stopped once both have
// started), on jemalloc with its totals printed about every ALLOC_INTERVAL bytes allocated (default 4e6), and the
// soak's sampler forcing a full GC in every thread every 10 s. Then each kind of activity alone for PHASE_SECONDS
// (default 60), a quiet GAP_SECONDS (default 20) after each, ROUNDS rounds (default 3), kinds in turn within a
// round; KINDS=idle,console,... picks some. The soak's own clients drive the traffic (their request records in
// the temporary directory printed at the start). A JSON line per phase: the floor (lowest reading) of `allocated`
// during the phase and in its quiet gap, and of the V8 heap after the sampler's full GCs; a table at the end.
//
// Kinds: idle (nothing but the sampler and the pools' health checks); console (console.mjs back to back: sign-in,
// key create, use, revoke, use); flood (flood.mjs, 429s); batch (batch.mjs, BATCH_LINES lines, default 300);
// redis (Redis cut 10 s / restored 10 s, as faults.ts cuts it, with one light canned-pool chat loop);
// postgres (the same for PostgreSQL); upstream (the faulty upstream stalls, resets, answers 500 and slowly, 15 s
// each, under the chat client on canned-pool); reload (SIGHUP with the flood plan's limit changed, every 3 s);
// canned (the chat client on canned-pool with the faulty upstream healthy: the control for redis, postgres and
// upstream). HEALTH_INTERVAL: the pools' health checks at another interval (0s: none). MALLOC_CONF_EXTRA: more jemalloc options for the replica (a heap profile).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { requester, tempDir, trustingFetch } from "../../harness/server.ts";
import { imageMallocConf, jemallocTotalsConf } from "../../harness/allocator.ts";
import { Sampler } from "./sampler.ts";
import { plans, replicaAllocator, startTopology } from "./topology.ts";
import { keySettings, runClient, soakTenants, warmEveryModel } from "./setup.ts";

const interval = Number(process.env.ALLOC_INTERVAL ?? 4e6);
const phaseMs = Number(process.env.PHASE_SECONDS ?? 60) * 1000;
const gapMs = Number(process.env.GAP_SECONDS ?? 20) * 1000;
const rounds = Number(process.env.ROUNDS ?? 3);
const batchLines = Number(process.env.BATCH_LINES ?? 300);
const allKinds = ["idle", "console", "flood", "batch", "redis", "postgres", "upstream", "reload", "canned"];
const kinds = (process.env.KINDS ?? allKinds.join(",")).split(",").filter(Boolean);
for (const k of kinds) if (!allKinds.includes(k)) throw new Error(`unknown kind ${k}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (n: number) => Number((n / 1e6).toFixed(2));

if (replicaAllocator.name !== "jemalloc") throw new Error("no jemalloc here (libjemalloc2), or SOAK_ALLOCATOR=glibc");
// The soak's allocator settings, with its totals printed far more often than the soak's every 2 GiB.
// MALLOC_CONF_EXTRA adds options (jemalloc's heap profile: `prof:true,lg_prof_sample:14,lg_prof_interval:29,prof_prefix:/tmp/x/jeprof`).
replicaAllocator.env.MALLOC_CONF = [imageMallocConf(), jemallocTotalsConf(interval), process.env.MALLOC_CONF_EXTRA].filter(Boolean).join(",");

const dir = tempDir("allocator-probe-");
const outDir = path.join(dir, "out");
mkdirSync(path.join(outDir, "requests"), { recursive: true });
process.stderr.write(`allocator-probe: kinds ${kinds.join(",")}, ${rounds} rounds of ${phaseMs / 1000}+${gapMs / 1000} s; MALLOC_CONF=${replicaAllocator.env.MALLOC_CONF}; in ${dir}\n`);
const topology = await startTopology(dir);
// One replica: the second (started so that the topology is the soak's) is stopped, and SIGHUPs go to the first only.
await topology.replicas[1]!.stop();
topology.replicas.splice(1, 1);
// HEALTH_INTERVAL (a duration: 100ms; 0s turns them off): the pools' active health checks at another interval than
// the soak's 1 s, the replica restarted on that config (topology.raw is the config restartReplica writes).
if (process.env.HEALTH_INTERVAL) {
  for (const model of topology.raw.models as { health?: { interval: string } }[]) if (model.health) model.health = { ...model.health, interval: process.env.HEALTH_INTERVAL };
  await topology.replicas[0]!.stop();
  await topology.restartReplica(0);
}
const replica = topology.replicas[0]!;
const pid = replica.child.pid!;
const readings = () => topology.allocatorReadings.filter((r) => r.pid === pid);
const ca = readFileSync(topology.caFile, "utf8");
const { fetch: tlsFetch, agent } = trustingFetch(ca);
const api = requester(tlsFetch, replica.origin);
const { gold, keys, operator } = await soakTenants(api, replica.origin);
await warmEveryModel(api, keys.warm.key);

const sampler = new Sampler(topology, path.join(outDir, "samples.csv"), ca);
sampler.start(10_000);

/** One of the soak's client processes, against the one replica, until `endAt`. */
const client = (name: string, script: string, endAt: number, extra: Record<string, unknown>) => runClient({ origin: replica.origin, caFile: topology.caFile, outDir }, name, script, endAt, extra);
const k = keySettings;
/** The soak's chat-upstream client on canned-pool alone (the faulty upstream is one of its two upstreams). */
const cannedChat = (endAt: number, loops: number) =>
  client("chat-canned", "chat.mjs", endAt, { models: ["canned-pool"], ...k(keys.upstream), abortKey: keys.upstreamAborts.key, abortKeyId: keys.upstreamAborts.id, loops, maxTokens: 48, pauseMs: 300 });
/** Calls `step` every `everyMs` until `endAt`. */
async function every(everyMs: number, endAt: number, step: (i: number) => Promise<void> | void) {
  for (let i = 0; Date.now() < endAt; i++) {
    await step(i);
    await sleep(Math.min(everyMs, Math.max(0, endAt - Date.now())));
  }
}
/** Cut 10 s (every connection reset, new ones refused, as faults.ts cuts them), restored 10 s, until `endAt`. */
async function outages(proxy: { cut(mode: "refuse"): void; restore(): void }, endAt: number) {
  while (Date.now() < endAt - 10_000) {
    proxy.cut("refuse");
    await sleep(10_000);
    proxy.restore();
    await sleep(Math.min(10_000, Math.max(0, endAt - Date.now())));
  }
}
let reloads = 0;
const activities: Record<string, (endAt: number) => Promise<unknown>> = {
  idle: (endAt) => sleep(endAt - Date.now()),
  console: (endAt) => client("console", "console.mjs", endAt, { ...operator, account: gold.id, everyMs: 0 }),
  flood: (endAt) => client("flood", "flood.mjs", endAt, { ...k(keys.flood), loops: 4 }),
  batch: async (endAt) => {
    await client("batch", "batch.mjs", endAt, { ...k(keys.batch), lines: batchLines, maxTokens: 48, startAt: Date.now() });
    await sleep(endAt - Date.now());
  },
  redis: (endAt) => Promise.all([cannedChat(endAt, 1), outages(topology.redis, endAt)]),
  postgres: (endAt) => Promise.all([cannedChat(endAt, 1), outages(topology.postgres.proxy, endAt)]),
  upstream: async (endAt) => {
    const chat = cannedChat(endAt, 2);
    for (const mode of ["stall", "reset", "error", "slow"] as const) {
      await topology.faulty.setMode(mode);
      await sleep(Math.min(15_000, endAt - Date.now()));
    }
    await topology.faulty.setMode("ok");
    await chat;
  },
  reload: (endAt) => every(3000, endAt, () => (topology.reload(plans(reloads++ % 2 ? 120 : 240)), undefined)),
  canned: (endAt) => cannedChat(endAt, 2),
};

function requestCount(): number {
  let n = 0;
  for (const name of ["console", "flood", "batch", "chat-canned"]) {
    try {
      n += readFileSync(path.join(outDir, "requests", `${name}.jsonl`), "utf8").split("\n").filter(Boolean).length;
    } catch {}
  }
  return n;
}

interface PhaseRow {
  round: number;
  kind: string;
  start: number;
  end: number;
  gapEnd: number;
  requests: number;
}
const rows: PhaseRow[] = [];
const floorOf = (from: number, to: number, value: (r: ReturnType<typeof readings>[number]) => number) => {
  const own = readings().filter((r) => r.t >= from && r.t <= to);
  return { floor: own.length ? mb(Math.min(...own.map(value))) : null, n: own.length };
};
const heapFloor = (from: number, to: number) => {
  const own = sampler.samples.filter((s) => s.t >= from && s.t <= to && Number.isFinite(s.heapAfterFullGc));
  return own.length ? mb(Math.min(...own.map((s) => s.heapAfterFullGc))) : null;
};
function summary(row: PhaseRow) {
  const during = floorOf(row.start, row.end, (r) => r.allocated);
  const gap = floorOf(row.end, row.gapEnd, (r) => r.allocated);
  const both = floorOf(row.start, row.gapEnd, (r) => r.allocated);
  return {
    round: row.round,
    kind: row.kind,
    t0: Math.round((row.start - t0) / 1000),
    requests: row.requests,
    allocatedFloor: during.floor,
    readings: during.n,
    gapFloor: gap.floor,
    gapReadings: gap.n,
    phaseAndGapFloor: both.floor,
    residentFloor: floorOf(row.start, row.gapEnd, (r) => r.resident).floor,
    heapAfterFullGcFloor: heapFloor(row.start, row.gapEnd),
  };
}

await sleep(gapMs);
const t0 = Date.now();
for (let round = 1; round <= rounds; round++) {
  for (const kind of kinds) {
    const before = requestCount();
    const start = Date.now();
    await activities[kind]!(start + phaseMs);
    const end = Date.now();
    await sleep(gapMs);
    const row = { round, kind, start, end, gapEnd: Date.now(), requests: requestCount() - before };
    rows.push(row);
    console.log(JSON.stringify(summary(row)));
  }
}
await sampler.stop();
writeFileSync(path.join(outDir, "allocator.csv"), ["t,allocated,active,metadata,resident", ...readings().map((r) => `${r.t},${r.allocated},${r.active},${r.metadata},${r.resident}`)].join("\n") + "\n");
console.log(`\nfloor of jemalloc allocated (MB), phase and its quiet gap, per round (readings: ${readings().length}; ${outDir}):`);
for (const kind of kinds) {
  const own = rows.filter((r) => r.kind === kind).map(summary);
  console.log(`${kind.padEnd(9)} ${own.map((s) => `${s.phaseAndGapFloor} (${s.requests} req, heap ${s.heapAfterFullGcFloor})`).join("  ")}`);
}
await topology.close();
await agent.close();
