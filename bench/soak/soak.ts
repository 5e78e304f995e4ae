// `npm run soak [-- --short]`: issue 47's soak. Two Modelgate replicas behind a balancer, on PostgreSQL and Redis
// behind TCP proxies, with three llama-servers, the canned upstream and a faulty one; traffic from client processes
// for SOAK_MINUTES (default 60; --short or SOAK_SHORT=1: 10) while faults are injected on a schedule; a sample of
// every replica every 10 s. Writes bench/soak/out/ (requests, faults, samples.csv, allocator.csv: jemalloc's totals) and bench/soak/report.html
// (a full run also docs/soak/), prints PASS/FAIL per check and exits 1 on a FAIL.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, hostname, totalmem } from "node:os";
import path from "node:path";
import pg from "pg";
import { modelsDir, repoRoot, requester, tempDir, trustingFetch } from "../../harness/server.ts";
import { batchCheck, errorChecks, fdChecks, leakChecks, recoveryChecks, spendCheck, usageChecks, type Check, type RequestRecord, type UsageByKey } from "./checks.ts";
import { runFaults, schedule } from "./faults.ts";
import { renderReport } from "./report.ts";
import { Sampler, type Sample } from "./sampler.ts";
import { replicaAllocator, startTopology, type Topology } from "./topology.ts";
import { adminClient, keySettings, runClient, soakTenants, warmEveryModel } from "./setup.ts";
import { redisChecks } from "./redis-counters.ts";

const short = process.argv.includes("--short") || process.env.SOAK_SHORT === "1";
const minutes = short ? 10 : Number(process.env.SOAK_MINUTES ?? 60);
const totalMs = minutes * 60_000;
/** The issue's windows are for an hour: a shorter run scales them (and says so in the report). */
const scale = minutes / 60;
const soakDir = import.meta.dirname;
const outDir = path.join(soakDir, "out");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The tree the replicas start from, read before they start ("-dirty": with changes not committed). */
const commit = (() => {
  try {
    return execFileSync("git", ["describe", "--always", "--dirty", "--abbrev=7"], { cwd: repoRoot, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
})();
rmSync(outDir, { recursive: true, force: true });
mkdirSync(path.join(outDir, "requests"), { recursive: true });
const dir = tempDir("modelgate-soak-");
process.stderr.write(`soak: ${minutes} min; starting the topology in ${dir}\n`);
const topology = await startTopology(dir);
const ca = readFileSync(topology.caFile, "utf8");
const { fetch: tlsFetch, agent } = trustingFetch(ca);
const api = requester(tlsFetch, topology.origin);
const { admin, adminJson } = adminClient(api);
const { gold, silver, keys, operator } = await soakTenants(api, topology.origin);
// Every model loaded on both replicas before the clock starts.
await warmEveryModel(api, keys.warm.key);

const sampler = new Sampler(topology, path.join(outDir, "samples.csv"), ca);
await sampler.sampleAll();
const idleStart: Sample[] = [...sampler.samples];
sampler.start(10_000);

const startedAt = Date.now();
const endAt = startedAt + totalMs;
const replicaKillAt = schedule(totalMs / 1000).find((s) => s.fault.kind === "replica")!.at;
const client = (name: string, script: string, extra: Record<string, unknown>) => runClient({ origin: topology.origin, caFile: topology.caFile, outDir }, name, script, endAt, extra);
const k = keySettings;
const clients = [
  client("chat-local", "chat.mjs", { models: ["stories"], ...k(keys.local), abortKey: keys.localAborts.key, abortKeyId: keys.localAborts.id, loops: 2, maxTokens: 48, pauseMs: 300 }),
  client("chat-upstream", "chat.mjs", { models: ["ls-pool", "canned-pool"], ...k(keys.upstream), abortKey: keys.upstreamAborts.key, abortKeyId: keys.upstreamAborts.id, loops: 3, maxTokens: 48, pauseMs: 300 }),
  client("embed-rerank", "embed-rerank.mjs", { ...k(keys.embed), pauseMs: 250 }),
  client("transcribe", "transcribe.mjs", { ...k(keys.transcribe), audioFile: path.join(modelsDir, "jfk.wav"), pauseMs: 4000 }),
  client("flood", "flood.mjs", { ...k(keys.flood), loops: 2 }),
  client("console", "console.mjs", { ...operator, account: gold.id, everyMs: 60_000 }),
  // Submitted 30 s before a replica is killed, so that the kill lands in the middle of its lines.
  client("batch", "batch.mjs", { ...k(keys.batch), lines: 2000, maxTokens: 48, startAt: startedAt + (replicaKillAt - 30) * 1000 }),
];
const windows = await runFaults(topology, startedAt, totalMs / 1000, path.join(outDir, "faults.jsonl"));
// What the killed replica had summed but not written: its successor found it in the usage journal (logged at start).
const recovered = topology.replicas
  .flatMap((r) => r.stderr.join("").split("\n"))
  .filter((l) => l.includes("usage left by a process"))
  .map((l) => JSON.parse(l) as { batches: number; events: number });
await Promise.all(clients);
const trafficEnd = Math.max(endAt, Date.now());
process.stderr.write(`${new Date().toISOString()} traffic over; idle for the token windows to close\n`);

// Idle: the usage buffers flush, the 1-minute token windows close, connections wind down.
await sleep(70_000);
await sampler.stop();
const idleEnd = topology.replicas.map((_, i) => sampler.samples.filter((s) => s.replica === i).at(-1)!);

const records: RequestRecord[] = readdirSync(path.join(outDir, "requests")).flatMap((f) =>
  readFileSync(path.join(outDir, "requests", f), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as RequestRecord),
);
const db = new pg.Client({ connectionString: topology.postgres.direct });
await db.connect();
const table: UsageByKey[] = (
  await db.query<{ key_id: string; requests: string; prompt: string; completion: string }>("select key_id, sum(requests) requests, sum(prompt_tokens) prompt, sum(completion_tokens) completion from usage group by key_id")
).rows.map((r) => ({ keyId: r.key_id, requests: Number(r.requests), prompt: Number(r.prompt), completion: Number(r.completion) }));
const accountTokens = new Map((await db.query<{ account_id: string; tokens: string }>("select account_id, sum(prompt_tokens + completion_tokens) tokens from usage where day = $1 group by account_id", [new Date().toISOString().slice(0, 10)])).rows.map((r) => [r.account_id, Number(r.tokens)]));
await db.end();
const usageRows = (await adminJson<{ data: { model: string; promptTokens: number; completionTokens: number; spendMicros: number }[] }>("GET", "/admin/v1/usage")).data;
const prices = new Map(((topology.raw.models as { id: string; pricing?: { input: number; output: number } }[]) ?? []).map((m) => [m.id, m.pricing ?? { input: 0, output: 0 }]));

/** What the requests of an account's keys that were cut short may have reserved and never settled (a killed replica's). */
function cutBound(accountId: string): number {
  const accountOf = new Map<string, string>([
    ...[keys.local, keys.localAborts, keys.transcribe, keys.warm].map((x) => [x.id, gold.id] as const),
    ...[keys.upstream, keys.upstreamAborts, keys.embed, keys.batch].map((x) => [x.id, silver.id] as const),
    ...records.filter((r) => r.client === "console" && r.keyId).map((r) => [r.keyId!, gold.id] as const),
  ]);
  const cut = records.filter((r) => r.keyId && accountOf.get(r.keyId) === accountId && (r.broken || r.status === "network")).reduce((n, r) => n + (r.bound ?? 0), 0);
  // The batch's lines running on the killed replica (at most the model's parallel 4, each a prompt and 48 tokens).
  return cut + (accountId === silver.id ? 4 * (600 + 48) : 0);
}

const graceMs = 20_000 * Math.max(scale, 0.5);
const leakWindowMs = 40 * 60_000 * scale;
const recoveryMs = 60_000 * Math.max(scale, 1 / 3);
const checks: Check[] = [
  ...leakChecks(sampler.samples, trafficEnd, leakWindowMs, short || minutes !== 60 ? `last ${(leakWindowMs / 60_000).toFixed(1)} min (40 of 60, scaled)` : "last 40 min", [
    ...windows,
    ...records.filter((r) => r.route === "batch").map((r) => ({ start: r.t, end: r.t + r.ms })),
  ]),
  ...fdChecks(idleStart, idleEnd),
  ...errorChecks(records, windows, graceMs),
  ...usageChecks(records, table),
  spendCheck(usageRows, prices),
  batchCheck(records),
  ...(await redisChecks(`redis://127.0.0.1:6379/9`, [gold, silver].map((a) => ({ id: a.id, bound: cutBound(a.id) })), accountTokens)),
  ...recoveryChecks(records, windows.filter((w) => w.kind !== "reload"), recoveryMs, recoveryMs === 60_000 ? "minute" : `${recoveryMs / 1000} s`),
  ...(await circuitChecks(topology)),
  reloadCheck(records, windows),
  revocationCheck(records),
];

/** Circuits closed at the end: every upstream of every pool healthy on every replica (/readyz with the admin token). */
async function circuitChecks(t: Topology): Promise<Check[]> {
  return Promise.all(
    t.replicas.map(async (replica, i) => {
      const res = await tlsFetch(`${replica.origin}/readyz`, { headers: admin });
      const body = (await res.json()) as { models?: { id: string; upstreams?: { url: string; state: string }[] }[] };
      const upstreams = (body.models ?? []).flatMap((m) => (m.upstreams ?? []).map((u) => `${m.id} ${u.state}`));
      const open = upstreams.filter((u) => !u.endsWith(" healthy"));
      return { name: `circuits closed at the end: replica ${i}, every upstream healthy`, pass: upstreams.length > 0 && open.length === 0, detail: `${upstreams.length} upstreams; not healthy: ${open.join(", ") || "none"}` };
    }),
  );
}

/** The SIGHUP with a changed plan: the flood key's answers name the new limit (240) from 2 s after it. */
function reloadCheck(rs: RequestRecord[], ws: { kind: string; end: number }[]): Check {
  const reload = ws.find((w) => w.kind === "reload");
  const after = rs.filter((r) => r.client === "flood" && reload && r.t > reload.end + 2000 && r.limit !== undefined);
  const stale = after.filter((r) => r.limit !== 240);
  return { name: "SIGHUP reload: the changed plan applies to keys already known", pass: !!reload && after.length > 0 && stale.length === 0, detail: `${after.length} flood answers after the reload; with the old limit: ${stale.length}` };
}

function revocationCheck(rs: RequestRecord[]): Check {
  const rounds = rs.filter((r) => r.route === "console key revoke").length;
  const served = rs.filter((r) => r.violation).length;
  return { name: "a key revoked in the console is refused on every replica within 2 s", pass: rounds > 0 && served === 0, detail: `${rounds} revocations; served after: ${served}` };
}

/** Per replica process, jemalloc's totals over the leak window: first and last reading, allocated and resident. */
function allocatorNotes(): string[] {
  const from = trafficEnd - leakWindowMs;
  const mb = (n: number) => (n / 1e6).toFixed(1);
  return [...new Set(topology.allocatorReadings.map((r) => r.pid))].flatMap((pid) => {
    const own = topology.allocatorReadings.filter((r) => r.pid === pid && r.t >= from && r.t <= trafficEnd);
    if (own.length < 2) return [];
    const [a, b] = [own[0]!, own.at(-1)!];
    const minutes = ((b.t - a.t) / 60_000).toFixed(0);
    return [`jemalloc, replica ${a.replica} (pid ${pid}), ${own.length} readings over ${minutes} min of the leak window: allocated ${mb(a.allocated)} → ${mb(b.allocated)} MB, resident ${mb(a.resident)} → ${mb(b.resident)} MB, metadata ${mb(a.metadata)} → ${mb(b.metadata)} MB (allocator.csv).`];
  });
}

const machine = `${hostname()}: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(1)} GB, Node ${process.version}, commit ${commit}`;
const notes = [
  `${minutes} min of traffic (${records.length} requests recorded by the clients), then 70 s idle.`,
  `The replicas ran on ${replicaAllocator.name === "jemalloc" ? `jemalloc (LD_PRELOAD=${replicaAllocator.env.LD_PRELOAD}, MALLOC_CONF=${replicaAllocator.env.MALLOC_CONF}), as docs/operations.md advises for a long-running server` : "glibc's malloc"}.`,
  ...(scale !== 1 ? [`Shorter than the hour: the leak fit covers the last ${(leakWindowMs / 60_000).toFixed(1)} min, recovery compares ${recoveryMs / 1000} s windows, 5xx are allowed up to ${graceMs / 1000} s after a fault ends.`] : []),
  `kill -9: the restarted replica wrote ${recovered.reduce((n, r) => n + r.events, 0)} usage events (${recovered.reduce((n, r) => n + r.batches, 0)} journal files) that the killed one had not written to the database; without the journal they were lost.`,
  ...allocatorNotes(),
    `Fault schedule: ${schedule(minutes * 60).map((s) => `${(s.at / 60).toFixed(1)}′ ${s.fault.name}`).join("; ")}.`,
];
// jemalloc's own totals beside the sampler's RSS: what the allocator holds for the process, and what it keeps resident.
const allocatorColumns = ["t", "replica", "pid", "allocated", "active", "metadata", "resident", "mapped", "retained"] as const;
writeFileSync(path.join(outDir, "allocator.csv"), [allocatorColumns.join(","), ...topology.allocatorReadings.map((r) => allocatorColumns.map((c) => r[c]).join(","))].join("\n") + "\n");
const html = renderReport({ title: `Modelgate soak, ${minutes} min`, machine, startedAt, endedAt: Date.now(), samples: sampler.samples, windows, checks, notes });
writeFileSync(path.join(soakDir, "report.html"), html);
if (!short && minutes >= 60) {
  const docs = path.join(repoRoot, "docs/soak");
  mkdirSync(docs, { recursive: true });
  writeFileSync(path.join(docs, "report.html"), html);
  copyFileSync(path.join(outDir, "samples.csv"), path.join(docs, "samples.csv"));
  copyFileSync(path.join(outDir, "faults.jsonl"), path.join(docs, "faults.jsonl"));
  copyFileSync(path.join(outDir, "allocator.csv"), path.join(docs, "allocator.csv"));
}

for (const note of notes) console.log(note);
for (const c of checks) console.log(`${c.pass ? "PASS" : "FAIL"}  ${c.name}: ${c.detail}`);
console.log(`report: ${path.join(soakDir, "report.html")}`);
await topology.close();
await agent.close();
rmSync(dir, { recursive: true, force: true });
process.exit(checks.every((c) => c.pass) ? 0 : 1);
