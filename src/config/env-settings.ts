import path from "node:path";

/** The settings a deployment changes, by environment variable (docs/configuration.md, "Environment variables"). */
export const settingVariables = {
  MODELGATE_HOST: "server.host",
  MODELGATE_PORT: "server.port",
  MODELGATE_DATA_DIR: "dataDir",
  MODELGATE_LOG_LEVEL: "logLevel",
  MODELGATE_LOG_FORMAT: "logFormat",
  MODELGATE_ADMIN_TOKEN: "adminToken",
  MODELGATE_KEY_SECRET: "keySecret",
  MODELGATE_DEPLOYMENT: "deployment",
  MODELGATE_TLS_CERT: "server.tls.cert",
  MODELGATE_TLS_KEY: "server.tls.key",
  MODELGATE_TRUST_PROXY: "server.trustProxy",
} as const;

/** Paths given in the environment are relative to the working directory, not to the config file. */
const pathSettings = new Set(["dataDir", "server.tls.cert", "server.tls.key"]);

/**
 * Lays the MODELGATE_* variables over a parsed config file, before it is validated (so a bad value is reported like
 * one in the file, naming the setting). Precedence: command-line flags > environment > file > defaults; the flags
 * are applied later, by the loader's overrides.
 */
export function applyEnvironment(raw: unknown, env: NodeJS.ProcessEnv): unknown {
  const config = structuredClone((raw ?? {}) as Record<string, unknown>);
  for (const [variable, setting] of Object.entries(settingVariables)) {
    const text = env[variable];
    if (text === undefined || text === "") continue;
    let value: unknown = text;
    if (setting === "server.port") value = /^\d+$/.test(text) ? Number(text) : text;
    else if (setting === "server.trustProxy") value = text.split(",").map((c) => c.trim()).filter(Boolean);
    else if (pathSettings.has(setting)) value = path.resolve(text);
    setPath(config, setting.split("."), value);
  }
  return config;
}

function setPath(target: Record<string, unknown>, keys: string[], value: unknown): void {
  let node = target;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    node = (node[key] = next !== null && typeof next === "object" ? next : {}) as Record<string, unknown>;
  }
  node[keys.at(-1)!] = value;
}
