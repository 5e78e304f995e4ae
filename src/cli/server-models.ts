import { readFileSync } from "node:fs";
import https from "node:https";
import path from "node:path";
import type { AppConfig } from "../config/app-config.ts";

export interface ServerModelState {
  id: string;
  state: string;
  active: number;
  queueDepth: number;
  error: string | null;
  /** An upstream model's pool, as the admin API shows it. */
  upstreams?: { url: string; state: string; inFlight: number; maxInFlight: number; recentFailures: number; latencyMs: number | null }[];
}

/** The running server's origin as the config describes it (0.0.0.0 / :: are reached on loopback). */
export function configuredOrigin(config: AppConfig): string {
  const host = ["0.0.0.0", "::", ""].includes(config.server.host) ? "127.0.0.1" : config.server.host;
  return `https://${host.includes(":") ? `[${host}]` : host}:${config.server.port}`;
}

/**
 * Asks a running server for its models' load states (GET /admin/v1/models with the admin token), trusting the
 * certificate the server uses (config tls.cert, or the one generated in <dataDir>/tls). Resolves null when no
 * server answers in time.
 */
export function fetchServerModels(config: AppConfig, origin: string, timeoutMs = 2000): Promise<ServerModelState[] | null> {
  if (!config.adminToken) return Promise.resolve(null);
  let ca: string | undefined;
  try {
    ca = readFileSync(config.server.tls?.cert ?? path.join(config.dataDir, "tls/cert.pem"), "utf8");
  } catch {
    ca = undefined;
  }
  return new Promise((resolve, reject) => {
    const req = https.get(`${origin}/admin/v1/models`, { ca, headers: { authorization: `Bearer ${config.adminToken}` }, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`${origin}/admin/v1/models answered ${res.statusCode}: ${body.slice(0, 200)}`));
        try {
          resolve((JSON.parse(body) as { data: ServerModelState[] }).data);
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (["ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENOTFOUND"].includes(err.code ?? "") || err.message === "timeout") resolve(null);
      else reject(err);
    });
  });
}
