import type { Capability, Endpoint } from "./config.schema.ts";

/** A plan with every default filled in. */
export interface Plan {
  name: string;
  rateLimit: { requests: number; windowMs: number };
  maxBodyBytes: number;
  maxUploadBytes: number;
  maxOutputTokens: number | null;
  models: string[];
  endpoints: Endpoint[];
  ipAllowlist: boolean;
}

/** A catalog entry with every default filled in and its source resolved. */
export interface ModelEntry {
  id: string;
  engine: "llama" | "onnx" | "upstream";
  source: string;
  /** Where the files live (a file for GGUF, a folder for ONNX layouts); null for upstream. */
  path: string | null;
  /** The hub ref when `source` is `hf:...`, so `modelgate pull` can fetch it. */
  hubRef: string | null;
  capabilities: Capability[];
  contextSize: number | null;
  parallel: number;
  threads: number;
  ownedBy: string;
  load: "eager" | "lazy";
  keepAliveMs: number | null;
  queueSize: number;
  requestTimeoutMs: number;
  dtype: string | null;
  defaults: { temperature?: number; topP?: number };
  maxInputTokens: number | null;
  url: string | null;
  apiKey: string | null;
  upstreamModel: string | null;
}

export interface AppConfig {
  configFile: string | null;
  configDir: string;
  server: {
    host: string;
    port: number;
    tls: { cert: string; key: string } | null;
    trustProxy: string[];
    shutdownTimeoutMs: number;
    requestTimeoutMs: number;
  };
  deployment: string;
  dataDir: string;
  logLevel: string;
  adminToken: string | null;
  keySecret: string | null;
  databaseUrl: string | null;
  redisUrl: string | null;
  anonymousRateLimit: { requests: number; windowMs: number };
  defaultPlan: string;
  plans: Record<string, Plan>;
  models: ModelEntry[];
  pull: "auto" | "never";
  /** True when no `models` were configured and the built-in catalog is served. */
  usingDefaultCatalog: boolean;
}
