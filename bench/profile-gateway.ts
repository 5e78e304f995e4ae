import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { throughput } from "./processes.ts";

/**
 * `node --import tsx bench/profile-gateway.ts OUT_DIR`: the gateway bench's load (authenticated GET /v1/models,
 * c=16, 10 s) on a server started with `--cpu-prof`; the .cpuprofile lands in OUT_DIR (open it in Chrome DevTools).
 */
const out = path.resolve(process.argv[2] ?? "profiles");
const dir = tempDir("profile-gateway-");
const raw = {
  dataDir: dir,
  plans: { bench: { rateLimit: { requests: 100_000_000, window: "1m" } } },
  defaultPlan: "bench",
  models: [{ id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" }],
};
const gateway = await spawnServer(raw, dir, [], { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${out}` });
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const url = `${gateway.origin}/v1/models`;
await throughput({ url, key, seconds: 2 });
console.log(`req/s: ${(await throughput({ url, key, seconds: 10 })).toFixed(0)}`);
await gateway.stop();
