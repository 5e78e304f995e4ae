import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
const dir = tempDir("scratch-models-");
const raw = { dataDir: dir, plans: { bench: { rateLimit: { requests: 100_000_000, window: "1m" } } }, defaultPlan: "bench",
  models: [{ id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" }] };
const gateway = await spawnServer(raw, dir, [], JSON.parse(process.env.SERVER_ENV ?? "{}"), path.resolve("dist/cli/run.js"));
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
console.log(JSON.stringify({ pid: gateway.child.pid, origin: gateway.origin, key }));
await new Promise((r) => setTimeout(r, Number(process.env.HOLD_SECONDS ?? 60) * 1000));
await gateway.stop();
