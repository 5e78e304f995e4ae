import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startCanned } from "../harness/peers.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { benchRateLimit, cannedModel, throughput } from "./processes.ts";

/**
 * `node --import tsx bench/profile-gateway.ts OUT_DIR [models|chat]`: a gateway bench's load on a server started
 * with `--cpu-prof`; the .cpuprofile lands in OUT_DIR (open it in Chrome DevTools, or
 * `node bench/profile-top.mjs FILE` for the top frames by self time).
 * - `models` (default): authenticated GET /v1/models, c=16, 10 s (bench/gateway.bench.ts);
 * - `chat`: non-stream chat through `engine: upstream` to the canned upstream, c=16, 10 s (bench/upstream.bench.ts);
 * - `stream`: the same chat with `stream: true`, relayed (bench/floor-gateway.bench.ts).
 * WARMUP_SECONDS (default 2) of the same load come first: read only the profile's last 10 s for the steady state.
 * ENTRY=dist/cli/run.js profiles the compiled build (`npm run build` first) instead of the sources through tsx.
 */
const out = path.resolve(process.argv[2] ?? "profiles");
const what = process.argv[3] ?? "models";
const dir = tempDir("profile-gateway-");
const canned = what === "chat" || what === "stream" ? await startCanned() : null;
const raw = {
  dataDir: dir,
  plans: { bench: { rateLimit: benchRateLimit } },
  defaultPlan: "bench",
  models: canned
    ? [cannedModel(canned.port)]
    : [{ id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" }],
};
const gateway = await spawnServer(raw, dir, [], { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${out}` }, process.env.ENTRY ? path.resolve(process.env.ENTRY) : undefined);
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const url = canned ? `${gateway.origin}/v1/chat/completions` : `${gateway.origin}/v1/models`;
const body = canned ? JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(what === "stream" ? { stream: true } : {}) }) : undefined;
await throughput({ url, key, body, seconds: Number(process.env.WARMUP_SECONDS ?? 2) });
console.log(`req/s: ${(await throughput({ url, key, body, seconds: 10 })).toFixed(0)}`);
await gateway.stop();
canned?.child.kill();
