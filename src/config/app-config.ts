import type { Capability, Endpoint } from "./config.schema.ts";

/** A plan with every default filled in. */
export interface Plan {
  name: string;
  rateLimit: { requests: number; windowMs: number };
  /** The bucket all of an account's keys share. */
  accountRateLimit: { requests: number; windowMs: number };
  maxBodyBytes: number;
  maxUploadBytes: number;
  /** Largest Batch API input file. */
  maxBatchFileBytes: number;
  /** What one account stores (Batch API files and its running batches' lines), and its files. */
  maxStoredFileBytes: number;
  maxStoredFiles: number;
  maxOutputTokens: number | null;
  models: string[];
  endpoints: Endpoint[];
  ipAllowlist: boolean;
  /** Share of a saturated model relative to other plans (fair share by tokens). */
  weight: number;
  priority: "interactive" | "batch";
  /** Requests of one key running or queued at once; null = unlimited. */
  maxConcurrent: number | null;
  /** Requests of all of an account's keys running or queued at once; null = unlimited. */
  maxConcurrentPerAccount: number | null;
  /** Tokens per window for each key, and for all the account's keys together; null: not metered (issue 32). */
  tokenLimit: TokenLimit | null;
  accountTokenLimit: TokenLimit | null;
  /** Tokens per UTC day or month for the account. */
  quota: { tokens: number; period: "day" | "month" } | null;
  /** Spend per UTC day or month for the account, in micro-units of the config's currency (an account may override it). */
  budget: Budget | null;
  /** The response cache for the plan's keys (issue 45); null: its keys never get or write entries. */
  cache: PlanCache | null;
}

/** A plan's part of the response cache: `ttlMs` and `maxEntryBytes` (null: the model's) only shorten the model's. */
export interface PlanCache {
  ttlMs: number | null;
  maxEntryBytes: number | null;
  /** What a hit costs: `none` (default) records it with no tokens, `full` with the tokens of the answer. */
  charge: "none" | "full";
}

/** A model's response cache (issue 45). */
export interface ModelCache {
  ttlMs: number;
  /** Answers larger than this (their entry as JSON) are not stored. */
  maxEntryBytes: number;
  /** Entries are read by every account, not only the one that wrote them. */
  shared: boolean;
}

export interface TokenLimit {
  tokens: number;
  windowMs: number;
}

/** A spending budget: `amountMicro` micro-units of the currency per UTC `period`. */
export interface Budget {
  amountMicro: number;
  period: "day" | "month";
}

export interface InputLimits {
  /** Images in one chat request. */
  maxImages: number;
  /** Width × height of one image. */
  maxImagePixels: number;
  /** Longer side over shorter side of one image. */
  maxImageAspectRatio: number;
  maxRerankDocuments: number;
  /** Characters of the query and all documents of one rerank request together. */
  maxRerankChars: number;
  /** Inputs in one embeddings request. */
  maxEmbeddingInputs: number;
  /** Choices of one legacy completion request: prompts × n (each is a generation). */
  maxCompletionChoices: number;
  /** Tools (functions) in one chat or responses request. */
  maxTools: number;
  /** Subschemas of all the tools' parameter schemas together (each is spelled out in a grammar). */
  maxToolSchemaNodes: number;
  /** Seconds of one uploaded recording; uploads decode to at most this many seconds of 48 kHz stereo samples. */
  maxAudioSeconds: number;
}

/** A catalog entry with every default filled in and its source resolved. */
export interface ModelEntry {
  id: string;
  /** The engine kind, a name in the engine registry (llama, onnx...). */
  engine: string;
  /** The configured source: a local path, a hub ref, or null for engines without local files. */
  source: string | null;
  /** Where the files live (a file for GGUF, a folder for ONNX layouts); null for engines without local files. */
  path: string | null;
  /** The hub ref when `source` is `hf:...`, so `modelgate pull` can fetch it. */
  hubRef: string | null;
  capabilities: Capability[];
  contextSize: number | null;
  parallel: number;
  ownedBy: string;
  load: "eager" | "lazy";
  keepAliveMs: number | null;
  queueSize: number;
  requestTimeoutMs: number;
  /** A request that cannot start within it gets 503 overloaded. */
  maxQueueWaitMs: number;
  /** A batch request waiting this long goes before interactive work. */
  batchMaxWaitMs: number;
  dtype: string | null;
  defaults: { temperature?: number; topP?: number };
  maxInputTokens: number | null;
  /** The exact-match response cache; null: off. */
  cache: ModelCache | null;
  /** Prices in micro-units of the config's currency per million tokens; null: not priced (spend 0). */
  pricing: { input: number; output: number } | null;
  /** Bounds on inputs that cost model time (see `defaultInputLimits`). */
  limits: InputLimits;
  /** The engine's own fields, validated (and defaulted) by the schema its kind declares. */
  options: Readonly<Record<string, unknown>>;
  /**
   * The engine the config named, when another serves the entry: `llama` for an entry that runs on the managed
   * llama-server (`llama.server`, engine then `llama-server`). Unset otherwise.
   */
  configuredEngine?: string;
}

/** Why a routed request moved on to the route's next target (issue 45); each is a trigger a route turns on or off. */
export type FallbackReason = "unavailable" | "overloaded" | "upstream_error" | "context_window";

/** A route with every default filled in: a public model id over catalog entries (docs/routing.md). */
export interface RouteEntry {
  id: string;
  /** The weighted split (one target: an alias); weights are relative, and a 0 takes no new requests. */
  targets: { model: string; weight: number }[];
  /** Tried in order after the chosen target fails with a reason in `fallbackOn`. */
  fallbacks: string[];
  fallbackOn: ReadonlySet<FallbackReason>;
  /** What every target and fallback can do: the route's capabilities. */
  capabilities: Capability[];
  /** The largest configured context window of its targets and fallbacks (null when none sets one). */
  contextSize: number | null;
  /** The route's own response cache (its targets' `cache` does not apply to it); null: off. */
  cache: ModelCache | null;
}

/** Where `engine: llama` entries run (top-level `llama` of the config). */
export interface LlamaSettings {
  /** auto: entries with parallel > 1 on the managed llama-server when it is built; never: in-process; always: on it. */
  server: "auto" | "never" | "always";
  /** A llama-server binary to use instead of the one `modelgate engines build llama-server` puts in the data dir. */
  serverBinary: string | null;
}

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string | null;
  redirectUri: string | null;
  roleClaim: string | null;
  adminValue: string;
  viewerValue: string;
  /** Lower-cased. */
  adminEmails: string[];
  viewerEmails: string[];
  /** Absolute path of extra CA certificates for the provider's TLS. */
  caFile: string | null;
}

/** The console's users and sessions. */
export interface ConsoleSettings {
  publicUrl: string | null;
  sessionIdleMs: number;
  sessionLifetimeMs: number;
  loginFailureLimit: { requests: number; windowMs: number };
  oidc: OidcSettings | null;
}

export interface AppConfig {
  configFile: string | null;
  configDir: string;
  server: {
    host: string;
    port: number;
    /** PEM files, or null for the generated self-signed pair. */
    tls: { cert: string; key: string } | null;
    ciphers: string;
    trustProxy: string[];
    shutdownTimeoutMs: number;
    bodyTimeoutMs: number;
    headerTimeoutMs: number;
    requestTimeoutMs: number;
    trimNativeMemory: boolean;
    /** 0: no bound. */
    maxRequestsPerConnection: number;
  };
  deployment: string;
  dataDir: string;
  logLevel: string;
  /** How `serve` writes its log; null: pretty on a terminal, JSON otherwise. */
  logFormat: "json" | "pretty" | null;
  adminToken: string | null;
  /** GET /metrics: the scrapers' token (besides the admin token), and whether token counters carry the account. */
  metricsToken: string | null;
  metricsPerAccount: boolean;
  /** Metrics and the access log on (default) or off. */
  observability: boolean;
  keySecret: string | null;
  databaseUrl: string | null;
  /** The PostgreSQL owner role's URL for `modelgate migrate`; set, serve and the CLI never migrate themselves. */
  databaseMigrationUrl: string | null;
  redisUrl: string | null;
  /** While Redis is unreachable: count locally and admit (`open`), or refuse with 503 (`closed`). */
  redisOnError: "open" | "closed";
  /** Keys seen valid keep working this long while the database is unreachable. */
  staleIfErrorMs: number;
  /** The response cache's store: this process's memory, at most `maxBytes` (LRU), unless Redis is configured. */
  cache: { maxBytes: number };
  /**
   * The Batch API runner: a node's lease on a batch lasts `leaseMs` unless renewed; idle nodes look every `pollMs`.
   * Uploads and outputs that name no expiry live `fileExpiryMs` and `outputExpiryMs` (null: until deleted).
   */
  batches: { leaseMs: number; pollMs: number; fileExpiryMs: number | null; outputExpiryMs: number | null };
  /** Per address; IPv6 addresses by their first `ipv6Prefix` bits. */
  anonymousRateLimit: { requests: number; windowMs: number; ipv6Prefix: number };
  /** Failed admin-token attempts from all addresses together. */
  adminTokenFailureLimit: { requests: number; windowMs: number };
  console: ConsoleSettings;
  defaultPlan: string;
  /** The currency of prices and budgets (ISO 4217 code, default USD). */
  currency: string;
  /** By name; a Map, so a name like `constructor` is just an unknown plan. */
  plans: ReadonlyMap<string, Plan>;
  models: ModelEntry[];
  /** Public model ids over the models (issue 45). */
  routes: RouteEntry[];
  llama: LlamaSettings;
  pull: "auto" | "never";
  /** True when no `models` were configured and the built-in catalog is served. */
  usingDefaultCatalog: boolean;
}
