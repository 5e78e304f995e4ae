import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { spawnServer, tempDir, trustingFetch, type SpawnedServer } from "../harness/server.ts";
import { benchRateLimit, cannedModel, gatewayEntry, startPeer } from "./processes.ts";

/** Modelgate and the floor of its own stack, side by side in front of one canned upstream. */
export interface FloorSides {
  canned: Peer;
  /** Modelgate as deployed (bench/processes.ts gatewayEntry), with `engine: upstream` to the canned upstream. */
  gateway: SpawnedServer;
  /** A key of the gateway's (a plan of 100 million requests a minute). */
  key: string;
  /** The gateway's certificate, which the floor serves too. */
  ca: string;
  /** bench/peers/fastify-floor.mjs in its `sse` mode, answering GET /v1/models with the gateway's own bytes. */
  floor: Peer;
  stop(): Promise<void>;
}

/**
 * Starts the canned upstream, Modelgate in front of it and the floor (Fastify over HTTPS, pino's access line, undici
 * to the same upstream): the two sides the floor-gateway bench and the CPU split compare. `gatewayEnv` and
 * `floorNodeArgs` go to the two processes (profilers' flags).
 */
export async function startFloorSides(options: { gatewayEnv?: NodeJS.ProcessEnv; floorNodeArgs?: string[] } = {}): Promise<FloorSides> {
  const dir = tempDir("bench-floor-sides-");
  const canned = await startCanned();
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit } },
    defaultPlan: "bench",
    models: [cannedModel(canned.port)],
  };
  const gateway = await spawnServer(raw, dir, [], options.gatewayEnv ?? {}, gatewayEntry());
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const { fetch, agent } = trustingFetch(readFileSync(ca, "utf8"));
  const modelsFile = path.join(dir, "models.json");
  writeFileSync(modelsFile, await (await fetch(`${gateway.origin}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).text());
  await agent.close();
  const floor = await startPeer("fastify-floor.mjs", [ca, path.join(dir, "tls/key.pem"), String(canned.port), "sse", modelsFile], options.floorNodeArgs ?? []);
  return {
    canned,
    gateway,
    key,
    ca,
    floor,
    async stop() {
      floor.child.kill();
      await gateway.stop();
      canned.child.kill();
    },
  };
}
