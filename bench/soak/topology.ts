import { writeFileSync } from "node:fs";
import YAML from "yaml";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { startLlamaServer, type LlamaServer } from "../../harness/llama-server.ts";
import { startCanned, startListening, type Peer } from "../../harness/peers.ts";
import { freshPostgresBehindProxy, redisTestUrl } from "../../harness/keys.ts";
import { compiledCliPath, modelsDir, spawnServer, type SpawnedServer } from "../../harness/server.ts";
import { inspectFlag } from "../../harness/full-gc.ts";
import { TcpProxy } from "../../harness/tcp-proxy.ts";
import { Balancer } from "../../harness/balancer.ts";
import { debianJemalloc, imageMallocConf, jemallocTotalsConf, parseJemallocTotals, type JemallocTotals } from "../../harness/allocator.ts";

export const adminToken = "soak-admin-token-Xq7vT2mLp9Rk4sWz8nYc1bHf";
export const metricsToken = "soak-metrics-token-Qm3vT8xLp2Rk7sWz5nYc1b";
const storiesFile = path.join(modelsDir, "stories260K.gguf");
const llamaArgs = ["-c", "1024", "-np", "2", "-t", "1"];

/**
 * The allocator the replicas run on, as docs/operations.md advises for a server that runs for weeks (decision 0050):
 * jemalloc preloaded when Debian's libjemalloc2 is installed, with the container image's MALLOC_CONF (decision 0051),
 * unless SOAK_ALLOCATOR=glibc. The soak adds jemalloc's totals on stderr about every 2 GiB allocated (a few lines,
 * about once a minute under the soak's load): what the allocator holds, beside the RSS the sampler reads.
 */
export const replicaAllocator: { name: "jemalloc" | "glibc"; env: NodeJS.ProcessEnv } = (() => {
  if (process.env.SOAK_ALLOCATOR === "glibc" || !debianJemalloc) return { name: "glibc", env: {} };
  return { name: "jemalloc", env: { LD_PRELOAD: debianJemalloc, MALLOC_CONF: `${imageMallocConf()},${jemallocTotalsConf(2 ** 31)}` } };
})();

/** jemalloc's totals as a replica printed them, with when they arrived. */
export interface AllocatorReading extends JemallocTotals {
  t: number;
  replica: number;
  pid: number;
}

/** What the soak runs: the peers, the shared services behind proxies it can cut, two replicas and their balancer. */
export interface Topology {
  dir: string;
  raw: Record<string, unknown>;
  llamaServers: LlamaServer[];
  canned: Peer;
  faulty: Peer & { setMode(mode: "ok" | "stall" | "reset" | "error" | "slow"): Promise<void> };
  postgres: Awaited<ReturnType<typeof freshPostgresBehindProxy>>;
  redis: TcpProxy;
  replicas: SpawnedServer[];
  /** jemalloc's totals from every replica, in the order they came (none on glibc). */
  allocatorReadings: AllocatorReading[];
  balancer: Balancer;
  origin: string;
  caFile: string;
  /** A replica's port (for its metrics), from its origin. */
  portOf(replica: SpawnedServer): number;
  killLlamaServer(index: number): void;
  restartLlamaServer(index: number): Promise<void>;
  killReplica(index: number): void;
  restartReplica(index: number): Promise<void>;
  /** The config with `plans` replaced, written where the replicas read it, then SIGHUP to each. */
  reload(plans: Record<string, unknown>): void;
  close(): Promise<void>;
}

/** The plans of the soak's three accounts: a large one, a small one, and the flooding one (a tight rate limit). */
export function plans(floodRequests = 120): Record<string, unknown> {
  return {
    gold: { weight: 2, rateLimit: { requests: 100_000, window: "1m" }, tokenLimit: { tokens: 50_000_000, window: "1m" }, quota: { tokens: 1_000_000_000, period: "day" } },
    silver: { rateLimit: { requests: 100_000, window: "1m" }, tokenLimit: { tokens: 50_000_000, window: "1m" }, quota: { tokens: 1_000_000_000, period: "day" } },
    flood: { rateLimit: { requests: floodRequests, window: "1m" }, tokenLimit: { tokens: 20_000, window: "1m" }, maxConcurrent: 4 },
  };
}

function models(llama: LlamaServer[], canned: Peer, faulty: Peer): unknown[] {
  const pool = { engine: "upstream", protocol: "openai", capabilities: ["chat"], health: { interval: "1s", unhealthyAfter: 2, healthyAfter: 1 }, breaker: { failures: 3, cooldown: "5s" } };
  return [
    { id: "stories", engine: "llama", source: storiesFile, capabilities: ["chat"], contextSize: 512, threads: 1, parallel: 4, queueSize: 64, pricing: { input: 0.1, output: 0.4 } },
    { ...pool, id: "ls-pool", tokenize: "llama-server", upstreams: llama.map((l) => ({ url: `${l.origin}/v1`, model: "stories260K", maxInFlight: 2 })), timeouts: { connect: "1s", firstByte: "10s", idle: "2s", total: "30s" }, pricing: { input: 0.2, output: 0.8 } },
    { ...pool, id: "canned-pool", upstreams: [canned, faulty].map((p) => ({ url: `http://127.0.0.1:${p.port}/v1`, model: "canned", maxInFlight: 8 })), timeouts: { connect: "1s", firstByte: "2s", idle: "1s", total: "10s" }, pricing: { input: 0.3, output: 1.2 } },
    { id: "embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1, pricing: { input: 0.02, output: 0 } },
    { id: "rerank", engine: "llama", source: path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), capabilities: ["rerank"], threads: 1, pricing: { input: 0.05, output: 0 } },
    { id: "whisper", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], threads: 1, pricing: { input: 1, output: 2 } },
  ];
}

async function startFaulty(): Promise<Topology["faulty"]> {
  const peer = await startListening(path.join(import.meta.dirname, "faulty-upstream.mjs"));
  return {
    ...peer,
    async setMode(mode) {
      await (await fetch(`http://127.0.0.1:${peer.port}/control`, { method: "POST", body: JSON.stringify({ mode }) })).text();
    },
  };
}

export async function startTopology(dir: string): Promise<Topology> {
  const llamaServers = await Promise.all([0, 1, 2].map(() => startLlamaServer(storiesFile, llamaArgs)));
  const canned = await startCanned();
  const faulty = await startFaulty();
  const postgres = await freshPostgresBehindProxy();
  // Its own database number: the soak's counters are read at the end, beside whatever else uses this Redis.
  const { proxy: redis, url: redisUrl } = await TcpProxy.inFrontOf(`${redisTestUrl}/9`);
  const raw: Record<string, unknown> = {
    dataDir: path.join(dir, "data"),
    logLevel: "warn",
    logFormat: "json",
    adminToken,
    metrics: { token: metricsToken },
    keySecret: `soak-${randomBytes(12).toString("hex")}`,
    // Behind the soak's TCP balancer, as docs/operations.md advises: the flooding client's busy connections would
    // otherwise stay on the survivor after the replica kill, and it would carry three times the other's load to the end.
    server: { maxRequestsPerConnection: 100 },
    database: { url: postgres.url },
    redis: { url: redisUrl },
    batches: { leaseTtl: "5s", pollInterval: "500ms" },
    anonymousRateLimit: { requests: 100_000, window: "1m" },
    plans: plans(),
    models: models(llamaServers, canned, faulty),
  };
  const replicas: SpawnedServer[] = [];
  // One at a time: the first migrates the fresh database.
  // The compiled build, as `npm start` and the Dockerfile run it (through tsx, source maps are on: the heap grows
  // by each file's parsed map as errors' stacks first pass through it); each replica with its inspector on loopback,
  // through which the sampler forces a full GC before reading memory (full-gc.ts).
  const entry = compiledCliPath();
  const allocatorReadings: AllocatorReading[] = [];
  const spawnReplica = async (index: number) => {
    const replica = await spawnServer(raw, dir, [], replicaAllocator.env, entry, [inspectFlag]);
    createInterface({ input: replica.child.stderr! }).on("line", (line) => {
      for (const totals of parseJemallocTotals(line)) allocatorReadings.push({ t: Date.now(), replica: index, pid: replica.child.pid!, ...totals });
    });
    return replica;
  };
  for (let i = 0; i < 2; i++) replicas.push(await spawnReplica(i));
  const portOf = (r: SpawnedServer) => Number(new URL(r.origin).port);
  const balancer = await Balancer.start(replicas.map(portOf));
  const caFile = path.join(raw.dataDir as string, "tls", "cert.pem");
  const topology: Topology = {
    dir,
    raw,
    llamaServers,
    canned,
    faulty,
    postgres,
    redis,
    replicas,
    allocatorReadings,
    balancer,
    origin: `https://127.0.0.1:${balancer.port}`,
    caFile,
    portOf,
    killLlamaServer(index) {
      llamaServers[index]!.child.kill("SIGKILL");
    },
    async restartLlamaServer(index) {
      const port = Number(new URL(llamaServers[index]!.origin).port);
      llamaServers[index] = await startLlamaServer(storiesFile, llamaArgs, port);
    },
    killReplica(index) {
      replicas[index]!.child.kill("SIGKILL");
    },
    async restartReplica(index) {
      replicas[index] = await spawnReplica(index);
      balancer.replace(index, portOf(replicas[index]!));
    },
    reload(nextPlans) {
      raw.plans = nextPlans;
      // spawnServer wrote each replica's config to a file of its own: rewrite those, then SIGHUP.
      for (const replica of replicas) {
        const file = replica.child.spawnargs[replica.child.spawnargs.indexOf("--config") + 1]!;
        writeFileSync(file, YAML.stringify(raw));
        replica.child.kill("SIGHUP");
      }
    },
    async close() {
      await Promise.all(replicas.map((r) => r.stop()));
      await balancer.close();
      await Promise.all(llamaServers.map((l) => l.stop()));
      canned.child.kill();
      faulty.child.kill();
      await redis.close();
      await postgres.close();
    },
  };
  return topology;
}
