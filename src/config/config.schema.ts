import { Type, type Static } from "@sinclair/typebox";

/** "500ms", "30s", "1m", "2h": the only duration format in the config. */
export const Duration = Type.String({ pattern: "^[0-9]+(ms|s|m|h)$", description: "e.g. 500ms, 30s, 1m, 1h" });

export const Endpoint = Type.Union(
  [Type.Literal("models"), Type.Literal("chat"), Type.Literal("embeddings"), Type.Literal("transcriptions"), Type.Literal("rerank")],
  { description: "An endpoint a plan or key may call" },
);
export type Endpoint = Static<typeof Endpoint>;
export const allEndpoints: Endpoint[] = ["models", "chat", "embeddings", "transcriptions", "rerank"];

export const Capability = Type.Union([
  Type.Literal("chat"),
  Type.Literal("embeddings"),
  Type.Literal("rerank"),
  Type.Literal("transcriptions"),
  Type.Literal("vision"),
  Type.Literal("tools"),
  Type.Literal("json"),
  Type.Literal("logprobs"),
  Type.Literal("reasoning"),
]);
export type Capability = Static<typeof Capability>;

export const RateLimitConfig = Type.Object(
  { requests: Type.Integer({ minimum: 1 }), window: Duration },
  { additionalProperties: false },
);
export type RateLimitConfig = Static<typeof RateLimitConfig>;

/** Tokens (prompt plus completion) per window, reserved at admission and settled to the actual usage (issue 32). */
export const TokenLimitConfig = Type.Object(
  { tokens: Type.Integer({ minimum: 1 }), window: Duration },
  { additionalProperties: false },
);

/** A UTC calendar period: a quota or budget resets at 00:00 UTC each day, or on the 1st of each month. */
export const MeterPeriod = Type.Union([Type.Literal("day"), Type.Literal("month")]);
export type MeterPeriod = Static<typeof MeterPeriod>;

/** An amount of money, as a number or a decimal string, with at most 6 decimals (micro-units): 12.5, "0.000150". */
export const Money = Type.Union([Type.Number({ minimum: 0 }), Type.String({ pattern: "^[0-9]+(\\.[0-9]{1,6})?$" })]);

/** The per-address limiter of requests without a usable key; IPv6 clients are counted by network (`ipv6Prefix`). */
export const AnonymousRateLimitConfig = Type.Object(
  { ...RateLimitConfig.properties, ipv6Prefix: Type.Optional(Type.Integer({ minimum: 1, maximum: 128, description: "IPv6 addresses sharing this prefix share one bucket (default 64)" })) },
  { additionalProperties: false },
);

/** Operators' single sign-on (OpenID Connect, authorization code with PKCE). */
export const OidcConfig = Type.Object(
  {
    issuer: Type.String({ minLength: 1, description: "The provider's issuer URL (its discovery document is at /.well-known/openid-configuration)" }),
    clientId: Type.String({ minLength: 1 }),
    clientSecret: Type.Optional(Type.String({ minLength: 1 })),
    /** Default: <console.publicUrl or the request's origin>/console/api/oidc/callback. */
    redirectUri: Type.Optional(Type.String({ minLength: 1 })),
    /** A claim of the ID token (a string or a list) that holds the role: `adminValue` or `viewerValue`. */
    roleClaim: Type.Optional(Type.String({ minLength: 1 })),
    adminValue: Type.Optional(Type.String({ minLength: 1 })),
    viewerValue: Type.Optional(Type.String({ minLength: 1 })),
    /** Emails that get operator-admin or operator-viewer (checked when no role claim gives a role). */
    adminEmails: Type.Optional(Type.Array(Type.String())),
    viewerEmails: Type.Optional(Type.Array(Type.String())),
    /** A PEM file of CA certificates trusted for the provider besides the system's (a private CA). */
    caFile: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

export const ConsoleConfig = Type.Object(
  {
    /** The console's public origin (https://console.example.com), for invite links and the OIDC redirect. */
    publicUrl: Type.Optional(Type.String({ pattern: "^https://[^/]+$" })),
    /** A session ends after this long without a request (default 30m)... */
    sessionIdleTimeout: Type.Optional(Duration),
    /** ...and this long after sign-in, whatever the activity (default 12h). */
    sessionLifetime: Type.Optional(Duration),
    /** Failed sign-ins per email (from any address) before that email is refused until the window ends (default 10 per 15m). */
    loginFailureLimit: Type.Optional(RateLimitConfig),
    oidc: Type.Optional(OidcConfig),
  },
  { additionalProperties: false },
);

/** Largest answer the response cache stores (`maxEntryBytes`): 16 MiB. */
export const maxCacheEntryBytes = 16 * 1024 * 1024;

/**
 * Issue 45: the exact-match response cache of a model (docs/routing.md#response-cache). Deterministic requests are
 * answered from an entry written within `ttl`; an answer larger than `maxEntryBytes` (default 256 KiB, as JSON) is
 * not stored; `shared` lets every account read the entries of every other (off: each account has its own).
 */
export const ModelCacheConfig = Type.Object(
  {
    ttl: Duration,
    maxEntryBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: maxCacheEntryBytes })),
    shared: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

/**
 * A plan's part of the response cache: its keys get hits only when the plan has `cache` (and the model too). `ttl`
 * and `maxEntryBytes` may only shorten the model's; `charge` is what a hit costs (default none: no tokens, no spend).
 */
export const PlanCacheConfig = Type.Object(
  {
    ttl: Type.Optional(Duration),
    maxEntryBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: maxCacheEntryBytes })),
    charge: Type.Optional(Type.Union([Type.Literal("none"), Type.Literal("full")])),
  },
  { additionalProperties: false },
);

export const PlanConfig = Type.Object(
  {
    rateLimit: Type.Optional(RateLimitConfig),
    /** All the account's keys together (default: the same as rateLimit). */
    accountRateLimit: Type.Optional(RateLimitConfig),
    maxBodyBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    maxUploadBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Largest Batch API input file (POST /v1/files with purpose batch); default 100 MiB. */
    maxBatchFileBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** What one account stores: Batch API files and the lines of its running batches (default 1 GiB)... */
    maxStoredFileBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** ...and its files (default 10,000). */
    maxStoredFiles: Type.Optional(Type.Integer({ minimum: 1 })),
    maxOutputTokens: Type.Optional(Type.Integer({ minimum: 1 })),
    models: Type.Optional(Type.Array(Type.String(), { description: "glob patterns of model ids" })),
    endpoints: Type.Optional(Type.Array(Endpoint)),
    ipAllowlist: Type.Optional(Type.Boolean()),
    /** The account's share of a saturated model, relative to other plans' weights (default 1). */
    weight: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: 1000 })),
    /** `batch` work gets only the capacity interactive work leaves (default interactive). */
    priority: Type.Optional(Type.Union([Type.Literal("interactive"), Type.Literal("batch")])),
    /** Requests of one key running or queued at once, over every model (default unlimited); over it, 429. */
    maxConcurrent: Type.Optional(Type.Integer({ minimum: 1 })),
    /** The same for all the account's keys together (default unlimited). */
    maxConcurrentPerAccount: Type.Optional(Type.Integer({ minimum: 1 })),
    /** Tokens per window for each key (issue 32). */
    tokenLimit: Type.Optional(TokenLimitConfig),
    /** Tokens per window for all the account's keys together (default: none). */
    accountTokenLimit: Type.Optional(TokenLimitConfig),
    /** Tokens per UTC day or month for the account, rebuilt from the usage table (a restart or a Redis flush keeps it). */
    quota: Type.Optional(Type.Object({ tokens: Type.Integer({ minimum: 1 }), period: MeterPeriod }, { additionalProperties: false })),
    /** Spend per UTC day or month for the account, in the config's `currency` (models' `pricing`); overridable per account. */
    budget: Type.Optional(Type.Object({ amount: Money, period: MeterPeriod }, { additionalProperties: false })),
    /** The response cache for this plan's keys (issue 45; off unless set). */
    cache: Type.Optional(PlanCacheConfig),
  },
  { additionalProperties: false },
);
export type PlanConfig = Static<typeof PlanConfig>;

/**
 * The fields every model entry has, whatever its engine. An engine's own fields (llama's `threads`, the upstream
 * engine's `upstreams`...) are validated by the schema the engine declares in `src/engines/registry.ts`, which the
 * loader gets handed (`EngineKinds`), so an unknown key is still an error naming its path.
 */
export const modelBaseProperties = {
  id: Type.String({ minLength: 1, pattern: "^[A-Za-z0-9._:/-]+$" }),
  engine: Type.String({ minLength: 1, description: "llama, onnx, or another registered engine kind" }),
  /** A local path (relative to the config file) or a hub ref `hf:org/repo[:file|:quant]`, stored under <dataDir>/models. */
  source: Type.Optional(Type.String({ minLength: 1 })),
  capabilities: Type.Array(Capability, { minItems: 1 }),
  contextSize: Type.Optional(Type.Integer({ minimum: 16 })),
  parallel: Type.Optional(Type.Integer({ minimum: 1, maximum: 4096 })),
  ownedBy: Type.Optional(Type.String()),
  load: Type.Optional(Type.Union([Type.Literal("eager"), Type.Literal("lazy")])),
  keepAlive: Type.Optional(Type.Union([Duration, Type.Literal("forever")])),
  queueSize: Type.Optional(Type.Integer({ minimum: 0 })),
  requestTimeout: Type.Optional(Duration),
  /** A request that cannot start within it gets 503 overloaded (default 30s); refused at once when its estimated wait is longer. */
  maxQueueWait: Type.Optional(Duration),
  /** A batch request waiting this long goes before interactive work (default 10m). */
  batchMaxWait: Type.Optional(Duration),
  /** The file variant of a hub layout to pull and load (transformers.js dtype: fp32, fp16, q8, q4...). */
  dtype: Type.Optional(Type.String()),
  /** Sampling defaults the model recommends, used when a request omits them. */
  defaults: Type.Optional(
    Type.Object(
      { temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })), topP: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })) },
      { additionalProperties: false },
    ),
  ),
  /** Prices per million tokens, in the config's `currency` (at most 6 decimals): spend, budgets. */
  pricing: Type.Optional(Type.Object({ input: Money, output: Money }, { additionalProperties: false })),
  /** The exact-match response cache for this model (issue 45; off unless set). */
  cache: Type.Optional(ModelCacheConfig),
  /** Longest embedding/rerank input in tokens; defaults to the model's own limit. */
  maxInputTokens: Type.Optional(Type.Integer({ minimum: 1 })),
  /** Bounds on request inputs that cost model time; over one, the request is a 400 naming the parameter. */
  limits: Type.Optional(
    Type.Object(
      {
        maxImages: Type.Optional(Type.Integer({ minimum: 0 })),
        maxImagePixels: Type.Optional(Type.Integer({ minimum: 1 })),
        maxImageAspectRatio: Type.Optional(Type.Number({ minimum: 1 })),
        maxRerankDocuments: Type.Optional(Type.Integer({ minimum: 1 })),
        maxRerankChars: Type.Optional(Type.Integer({ minimum: 1 })),
        maxEmbeddingInputs: Type.Optional(Type.Integer({ minimum: 1 })),
        /** Choices of one /v1/completions request: its prompts times `n`. */
        maxCompletionChoices: Type.Optional(Type.Integer({ minimum: 1 })),
        maxTools: Type.Optional(Type.Integer({ minimum: 0 })),
        maxToolSchemaNodes: Type.Optional(Type.Integer({ minimum: 1 })),
        /** Longest recording a transcription model takes; it also sets the decoded-samples budget (decode.ts). */
        maxAudioSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
      },
      { additionalProperties: false },
    ),
  ),
};

/**
 * A public model id over catalog entries (issue 45, docs/routing.md): a weighted split over `targets` (one target is
 * an alias), then `fallbacks` in order when the chosen target fails with a trigger of `fallbackOn`. Targets and
 * fallbacks are model ids, never other routes.
 */
export const RouteConfig = Type.Object(
  {
    id: modelBaseProperties.id,
    targets: Type.Array(
      Type.Object(
        {
          model: Type.String({ minLength: 1 }),
          /** Its share of the route's requests, relative to the other targets' (default 1; 0 takes none). */
          weight: Type.Optional(Type.Number({ minimum: 0, maximum: 1_000_000 })),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 64 },
    ),
    /** Tried in this order when the chosen target fails with a trigger that is on (default: none). */
    fallbacks: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: 16 })),
    /** Which failures move a request to the next fallback; each is on by default. */
    fallbackOn: Type.Optional(
      Type.Object(
        {
          /** The target cannot serve now: not loaded, its files missing, its load failed, every upstream down or ejected. */
          unavailable: Type.Optional(Type.Boolean()),
          /** 503 overloaded: its queue is full, or no slot within maxQueueWait; an upstream's 429 or 503. */
          overloaded: Type.Optional(Type.Boolean()),
          /** An upstream's other 5xx, a network error or a timeout (what the §7 client rules retry). */
          upstreamError: Type.Optional(Type.Boolean()),
          /** The prompt (with max_tokens) does not fit the target's context window: the next target that fits. */
          contextWindow: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
    /** The route's own response cache (issue 45; off unless set): entries under the route's id, whichever target served. */
    cache: Type.Optional(ModelCacheConfig),
  },
  { additionalProperties: false },
);
export type RouteConfig = Static<typeof RouteConfig>;

export const ModelConfig = Type.Object(modelBaseProperties, { additionalProperties: true });
/** A model entry as written in a config: the base fields plus its engine's own (`threads`, `upstreams`...). */
export type ModelConfigInput = Static<typeof ModelConfig> & Record<string, unknown>;
export type ModelConfig = Static<typeof ModelConfig>;

export const Config = Type.Object(
  {
    server: Type.Optional(
      Type.Object(
        {
          host: Type.Optional(Type.String()),
          port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535 })),
          tls: Type.Optional(
            Type.Object(
              {
                cert: Type.Optional(Type.String()),
                key: Type.Optional(Type.String()),
                /** OpenSSL cipher list (TLS 1.3 suites and TLS 1.2 ones); the default allows only AEAD suites with ECDHE. */
                ciphers: Type.Optional(Type.String({ minLength: 1 })),
              },
              { additionalProperties: false },
            ),
          ),
          trustProxy: Type.Optional(Type.Array(Type.String())),
          shutdownTimeout: Type.Optional(Duration),
          /** How long a client may take to send a request body once its headers arrived (408 after). */
          bodyTimeout: Type.Optional(Duration),
          /** How long a client may take to send the request line and headers (408 after). */
          headerTimeout: Type.Optional(Duration),
          requestTimeout: Type.Optional(Duration),
          /** After each major GC, return glibc's free pages to the system (malloc_trim; Linux with glibc only). */
          trimNativeMemory: Type.Optional(Type.Boolean()),
          /**
           * Requests one keep-alive connection may carry before the answer to the last closes it (0: no bound). Behind a
           * TCP balancer, a bound re-spreads busy clients' connections after a replica restarts.
           */
          maxRequestsPerConnection: Type.Optional(Type.Integer({ minimum: 0 })),
        },
        { additionalProperties: false },
      ),
    ),
    deployment: Type.Optional(Type.String({ minLength: 1 })),
    dataDir: Type.Optional(Type.String()),
    logLevel: Type.Optional(Type.Union(["fatal", "error", "warn", "info", "debug", "trace", "silent"].map((l) => Type.Literal(l)))),
    /** `pretty` (readable lines) or `json`; unset: pretty when stderr is a terminal, else JSON. */
    logFormat: Type.Optional(Type.Union([Type.Literal("json"), Type.Literal("pretty")])),
    /** Token for /admin/v1; never accepted on /v1. Admin API is off when unset. */
    adminToken: Type.Optional(Type.String({ minLength: 16 })),
    metrics: Type.Optional(
      Type.Object(
        {
          /** false turns off GET /metrics and the access log (they are on by default). */
          enabled: Type.Optional(Type.Boolean()),
          /** A token for Prometheus scrapers: it opens GET /metrics and nothing else. */
          token: Type.Optional(Type.String({ minLength: 16 })),
          /** Label token counters by account (off: accounts are unbounded). */
          perAccount: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
    /** HMAC secret for API key hashes; generated into <dataDir>/secret when unset. */
    keySecret: Type.Optional(Type.String({ minLength: 16 })),
    database: Type.Optional(
      Type.Object(
        {
          url: Type.Optional(Type.String()),
          /**
           * PostgreSQL: the owner role's URL, used only by `modelgate migrate`. Set, the serving role (url) never
           * migrates: it checks the schema version at start and refuses to start while migrations are pending.
           */
          migrationUrl: Type.Optional(Type.String()),
        },
        { additionalProperties: false },
      ),
    ),
    redis: Type.Optional(
      Type.Object(
        {
          url: Type.Optional(Type.String()),
          /** While Redis is unreachable: `open` counts limits locally and admits; `closed` answers 503 overloaded. */
          onError: Type.Optional(Type.Union([Type.Literal("open"), Type.Literal("closed")])),
        },
        { additionalProperties: false },
      ),
    ),
    store: Type.Optional(
      Type.Object(
        {
          /** How long keys seen valid keep working while the database is unreachable. */
          staleIfError: Type.Optional(Duration),
        },
        { additionalProperties: false },
      ),
    ),
    /** The response cache's store (issue 45): in-process memory up to `maxBytes` (LRU), or Redis when `redis.url` is set. */
    cache: Type.Optional(Type.Object({ maxBytes: Type.Optional(Type.Integer({ minimum: 1 })) }, { additionalProperties: false })),
    /** The Batch API's runner: how long a node's lease on a batch lasts unless renewed, and how often idle nodes look for work. */
    batches: Type.Optional(
      Type.Object(
        {
          leaseTtl: Type.Optional(Duration),
          pollInterval: Type.Optional(Duration),
          /** How long an uploaded file lives when its upload names no `expires_after` (default 720h, OpenAI's 30 days). */
          fileExpiry: Type.Optional(Type.Union([Duration, Type.Literal("never")])),
          /** How long a batch's output and error files live when the batch names no `output_expires_after` (default 720h). */
          outputExpiry: Type.Optional(Type.Union([Duration, Type.Literal("never")])),
        },
        { additionalProperties: false },
      ),
    ),
    console: Type.Optional(ConsoleConfig),
    anonymousRateLimit: Type.Optional(AnonymousRateLimitConfig),
    /** Failed admin-token attempts allowed from all addresses together; past it every attempt is 429 until the window ends. */
    adminTokenFailureLimit: Type.Optional(RateLimitConfig),
    defaultPlan: Type.Optional(Type.String()),
    /** The currency of models' `pricing` and plans' `budget` (default USD); a label, never converted. */
    currency: Type.Optional(Type.String({ pattern: "^[A-Z]{3}$" })),
    plans: Type.Optional(Type.Record(Type.String(), PlanConfig)),
    models: Type.Optional(Type.Array(ModelConfig)),
    /** Public model ids over the models: weighted splits and ordered fallbacks (docs/routing.md). */
    routes: Type.Optional(Type.Array(RouteConfig)),
    /** Where `engine: llama` entries run (docs/engines.md, "llama on the managed llama-server"). */
    llama: Type.Optional(
      Type.Object(
        {
          /** auto (default): entries with parallel > 1 run on the managed llama-server when it is built; never; always. */
          server: Type.Optional(Type.Union([Type.Literal("auto"), Type.Literal("never"), Type.Literal("always")])),
          /** A llama-server binary instead of the one `modelgate engines build llama-server` builds into the data dir. */
          serverBinary: Type.Optional(Type.String({ minLength: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
    /** `auto` pulls missing hub models at start. */
    pull: Type.Optional(Type.Union([Type.Literal("auto"), Type.Literal("never")])),
  },
  { additionalProperties: false },
);
export type ConfigInput = Static<typeof Config>;
