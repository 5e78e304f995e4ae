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

/** Modelgate in front of the canned upstream, with a key, and the files the floor serves from it. */
export interface CannedGateway {
  gateway: SpawnedServer;
  /** A key of the gateway's (a plan of 100 million requests a minute). */
  key: string;
  /** The gateway's certificate and private key (PEM files). */
  cert: string;
  tlsKey: string;
  /** The gateway's answer to an authenticated GET /v1/models, saved. */
  modelsFile: string;
}

/**
 * Starts Modelgate from `entry` (the CLI script of a checkout) with `engine: upstream` to the canned upstream on
 * `cannedPort`, makes it a key, and saves its TLS files' paths and its GET /v1/models answer for the floor to serve.
 */
export async function startCannedGateway(cannedPort: number, entry: string, env: NodeJS.ProcessEnv = {}): Promise<CannedGateway> {
  const dir = tempDir("bench-canned-gateway-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit } },
    defaultPlan: "bench",
    models: [cannedModel(cannedPort)],
  };
  const gateway = await spawnServer(raw, dir, [], env, entry);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const cert = path.join(dir, "tls/cert.pem");
  const { fetch, agent } = trustingFetch(readFileSync(cert, "utf8"));
  const modelsFile = path.join(dir, "models.json");
  writeFileSync(modelsFile, await (await fetch(`${gateway.origin}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).text());
  await agent.close();
  return { gateway, key, cert, tlsKey: path.join(dir, "tls/key.pem"), modelsFile };
}

/**
 * Starts the canned upstream, Modelgate in front of it and the floor (Fastify over HTTPS, pino's access line, undici
 * to the same upstream): the two sides the floor-gateway bench and the CPU split compare. `gatewayEnv` and
 * `floorNodeArgs` go to the two processes (profilers' flags).
 */
export async function startFloorSides(options: { gatewayEnv?: NodeJS.ProcessEnv; floorNodeArgs?: string[] } = {}): Promise<FloorSides> {
  const canned = await startCanned();
  const { gateway, key, cert, tlsKey, modelsFile } = await startCannedGateway(canned.port, gatewayEntry(), options.gatewayEnv);
  const floor = await startFloorPeer(canned.port, { cert, tlsKey, modelsFile }, options.floorNodeArgs);
  return {
    canned,
    gateway,
    key,
    ca: cert,
    floor,
    async stop() {
      floor.child.kill();
      await gateway.stop();
      canned.child.kill();
    },
  };
}

/** bench/peers/fastify-floor.mjs in its `sse` mode in front of the canned upstream, serving a gateway's certificate and models list. */
export function startFloorPeer(cannedPort: number, from: Pick<CannedGateway, "cert" | "tlsKey" | "modelsFile">, nodeArgs: string[] = []): Promise<Peer> {
  return startPeer("fastify-floor.mjs", [from.cert, from.tlsKey, String(cannedPort), "sse", from.modelsFile], nodeArgs);
}
