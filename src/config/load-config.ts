import { readFileSync } from "node:fs";
import path from "node:path";
import { Value } from "@sinclair/typebox/value";
import YAML from "yaml";
import { Config, allEndpoints, modelBaseProperties, type ConfigInput, type ModelConfigInput, type PlanConfig } from "./config.schema.ts";
import type { AppConfig, ConsoleSettings, InputLimits, LlamaSettings, ModelEntry, Plan } from "./app-config.ts";
import type { EngineKinds } from "./engine-kinds.ts";
import { parseDuration, parseTimerDuration } from "./duration.ts";
import { parseMoney } from "./money.ts";
import { defaultCacheMemoryBytes, resolveModelCache, resolvePlanCache } from "./cache-config.ts";
import { isHubRef, localPathForHubRef, parseHubRef } from "./hub-ref.ts";
import { defaultCatalog } from "./default-catalog.ts";
import { parseCidr } from "./cidr.ts";
import { interpolateEnv } from "./env-interpolation.ts";
import { applyEnvironment } from "./env-settings.ts";
import { generateTokenHint, weakTokenReason } from "./token-strength.ts";
import { ConfigError } from "./config-error.ts";
import { resolveRoutes } from "./routes-config.ts";

export { ConfigError } from "./config-error.ts";

export interface ConfigOverrides {
  dataDir?: string;
  host?: string;
  port?: number;
}

export const defaultPlanName = "default";

/**
 * Defaults of a model's input limits: generous for real use (OpenAI's own caps are similar: 2,048 embedding inputs,
 * vision images up to ~2048 px a side after resizing), small enough that one request cannot hold a model for long.
 */
export const defaultInputLimits: InputLimits = {
  maxImages: 16,
  maxImagePixels: 16_777_216,
  maxImageAspectRatio: 20,
  maxRerankDocuments: 1000,
  maxRerankChars: 1_000_000,
  maxEmbeddingInputs: 2048,
  maxCompletionChoices: 16,
  maxTools: 128,
  maxToolSchemaNodes: 4096,
  maxAudioSeconds: 7200,
};

/**
 * TLS 1.3's suites, then TLS 1.2 with ECDHE and an AEAD (AES-GCM, ChaCha20-Poly1305) only: no CBC, SHA-1, CCM or
 * ARIA suites, which Node's default list still offers on TLS 1.2.
 */
export const defaultCiphers = [
  "TLS_AES_256_GCM_SHA384",
  "TLS_CHACHA20_POLY1305_SHA256",
  "TLS_AES_128_GCM_SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
].join(":");

const builtInDefaultPlan: Plan = {
  name: defaultPlanName,
  rateLimit: { requests: 600, windowMs: 60_000 },
  accountRateLimit: { requests: 600, windowMs: 60_000 },
  maxBodyBytes: 10 * 1024 * 1024,
  maxUploadBytes: 25 * 1024 * 1024,
  maxBatchFileBytes: 100 * 1024 * 1024,
  maxStoredFileBytes: 1024 * 1024 * 1024,
  maxStoredFiles: 10_000,
  maxOutputTokens: null,
  models: ["*"],
  endpoints: [...allEndpoints],
  ipAllowlist: false,
  weight: 1,
  priority: "interactive",
  maxConcurrent: null,
  maxConcurrentPerAccount: null,
  tokenLimit: null,
  accountTokenLimit: null,
  quota: null,
  budget: null,
  cache: null,
};

function parseText(text: string, file: string): unknown {
  try {
    return file.endsWith(".json") ? JSON.parse(text) : YAML.parse(text);
  } catch (err) {
    throw new ConfigError(`${file}: not valid ${file.endsWith(".json") ? "JSON" : "YAML"}: ${(err as Error).message}`);
  }
}

/** "/server/tsl" -> "server.tsl"; "/models/0/id" -> "models[0].id". */
function dottedPath(pointer: string): string {
  return pointer
    .split("/")
    .filter(Boolean)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((acc, part) => (/^[0-9]+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

function firstErrorOf(schema: Parameters<typeof Value.Errors>[0], value: unknown, file: string, prefix = ""): ConfigError | null {
  const firstError = Value.Errors(schema, value).First();
  if (!firstError) return null;
  const inner = dottedPath(firstError.path);
  const where = prefix ? (inner ? `${prefix}.${inner}` : prefix) : inner || "(root)";
  if (firstError.message === "Unexpected property") return new ConfigError(`${file}: unknown key "${where.split(/[.[]/).pop()}" at ${where}`);
  return new ConfigError(`${file}: invalid value at ${where}: ${firstError.message}`);
}

function validate(raw: unknown, file: string): ConfigInput {
  const input = raw ?? {};
  const error = firstErrorOf(Config, input, file);
  if (error) throw error;
  return input as ConfigInput;
}

const baseKeys = new Set(Object.keys(modelBaseProperties));

/**
 * A model entry's engine-specific fields, validated by the schema its engine kind declares (unknown keys name their
 * path, as for the rest of the config) and completed with that schema's defaults.
 */
function engineOptions(model: ModelConfigInput, index: number, file: string, engines: EngineKinds): Record<string, unknown> {
  const schema = engines.optionsSchema(model.engine);
  if (!schema) {
    throw new ConfigError(`${file}: invalid value at models[${index}].engine: unknown engine "${model.engine}" (known: ${engines.names().join(", ")})`);
  }
  const own = Object.fromEntries(Object.entries(model).filter(([key]) => !baseKeys.has(key)));
  const error = firstErrorOf(schema, own, file, `models[${index}]`);
  if (error) throw error;
  return Value.Default(schema, structuredClone(own)) as Record<string, unknown>;
}

function resolvePlan(name: string, plan: PlanConfig): Plan {
  const rateLimit = plan.rateLimit ? { requests: plan.rateLimit.requests, windowMs: parseDuration(plan.rateLimit.window) } : builtInDefaultPlan.rateLimit;
  return {
    name,
    rateLimit,
    accountRateLimit: plan.accountRateLimit ? { requests: plan.accountRateLimit.requests, windowMs: parseDuration(plan.accountRateLimit.window) } : rateLimit,
    maxBodyBytes: plan.maxBodyBytes ?? builtInDefaultPlan.maxBodyBytes,
    maxUploadBytes: plan.maxUploadBytes ?? builtInDefaultPlan.maxUploadBytes,
    maxBatchFileBytes: plan.maxBatchFileBytes ?? builtInDefaultPlan.maxBatchFileBytes,
    maxStoredFileBytes: plan.maxStoredFileBytes ?? builtInDefaultPlan.maxStoredFileBytes,
    maxStoredFiles: plan.maxStoredFiles ?? builtInDefaultPlan.maxStoredFiles,
    maxOutputTokens: plan.maxOutputTokens ?? null,
    models: plan.models ?? ["*"],
    endpoints: plan.endpoints ?? [...allEndpoints],
    ipAllowlist: plan.ipAllowlist ?? false,
    weight: plan.weight ?? 1,
    priority: plan.priority ?? "interactive",
    maxConcurrent: plan.maxConcurrent ?? null,
    maxConcurrentPerAccount: plan.maxConcurrentPerAccount ?? null,
    tokenLimit: plan.tokenLimit ? { tokens: plan.tokenLimit.tokens, windowMs: parseDuration(plan.tokenLimit.window) } : null,
    accountTokenLimit: plan.accountTokenLimit ? { tokens: plan.accountTokenLimit.tokens, windowMs: parseDuration(plan.accountTokenLimit.window) } : null,
    quota: plan.quota ? { tokens: plan.quota.tokens, period: plan.quota.period } : null,
    budget: plan.budget ? { amountMicro: configMoney(plan.budget.amount, `plans.${name}.budget.amount`), period: plan.budget.period } : null,
    cache: resolvePlanCache(plan.cache),
  };
}

function configMoney(value: number | string, where: string): number {
  try {
    return parseMoney(value, where);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

export interface ModelContext {
  configDir: string;
  dataDir: string;
  serverTimeoutMs: number;
  engines: EngineKinds;
  /** Where llama entries run (default: auto, the data dir's build). */
  llama?: LlamaSettings;
  file?: string;
  index?: number;
}

/** A model entry with every default filled in, its files located and its engine's own fields validated. */
export function resolveModel(model: ModelConfigInput, ctx: ModelContext): ModelEntry {
  const file = ctx.file ?? "config";
  const index = ctx.index ?? 0;
  const options = ctx.engines.resolvePaths(model.engine, engineOptions(model, index, file, ctx.engines), ctx.configDir);
  const source = model.source ?? null;
  const hubRef = source && isHubRef(source) ? source : null;
  let modelPath: string | null = null;
  if (ctx.engines.hasLocalFiles(model.engine)) {
    if (!source) throw new ConfigError(`${file}: models[${index}].source is required for engine ${model.engine}`);
    modelPath = hubRef ? localPathForHubRef(ctx.dataDir, parseHubRef(hubRef)) : path.resolve(ctx.configDir, source);
  }
  const parallel = model.parallel ?? ctx.engines.defaultParallel(model.engine, options);
  const entry: ModelEntry = {
    id: model.id,
    engine: model.engine,
    source,
    path: modelPath,
    hubRef,
    capabilities: model.capabilities,
    contextSize: model.contextSize ?? null,
    parallel,
    ownedBy: model.ownedBy ?? "modelgate",
    load: model.load ?? "eager",
    keepAliveMs: model.keepAlive === undefined || model.keepAlive === "forever" ? null : parseTimerDuration(model.keepAlive),
    queueSize: model.queueSize ?? Math.max(16, parallel * 8),
    requestTimeoutMs: model.requestTimeout ? parseTimerDuration(model.requestTimeout) : ctx.serverTimeoutMs,
    maxQueueWaitMs: parseTimerDuration(model.maxQueueWait ?? "30s"),
    batchMaxWaitMs: parseTimerDuration(model.batchMaxWait ?? "10m"),
    dtype: model.dtype ?? null,
    defaults: model.defaults ?? {},
    maxInputTokens: model.maxInputTokens ?? null,
    cache: resolveModelCache(model.cache),
    pricing: model.pricing
      ? { input: configMoney(model.pricing.input, `${file}: models[${index}].pricing.input`), output: configMoney(model.pricing.output, `${file}: models[${index}].pricing.output`) }
      : null,
    limits: { ...defaultInputLimits, ...model.limits },
    options,
  };
  const claim = ctx.engines.unsupportedClaim(entry);
  if (claim) throw new ConfigError(`${file}: models[${index}] "${model.id}": ${claim}`);
  try {
    return ctx.engines.place(entry, { llama: ctx.llama ?? { server: "auto", serverBinary: null }, dataDir: ctx.dataDir });
  } catch (err) {
    throw new ConfigError(`${file}: models[${index}] "${model.id}": ${(err as Error).message}`);
  }
}

/**
 * Builds the runtime config from already-parsed input; `file` is only used in messages and for relative paths.
 * `engines` (the engine registry) validates each model's engine-specific fields and capability claims.
 */
export function buildConfig(raw: unknown, file: string | null, engines: EngineKinds, overrides: ConfigOverrides = {}): AppConfig {
  const input = validate(raw, file ?? "config");
  const configDir = file ? path.dirname(path.resolve(file)) : process.cwd();
  const dataDir = overrides.dataDir
    ? path.resolve(overrides.dataDir)
    : input.dataDir
      ? path.resolve(configDir, input.dataDir)
      : path.resolve("data");
  const server = input.server ?? {};
  const requestTimeoutMs = parseTimerDuration(server.requestTimeout ?? "10m");

  const plans = new Map<string, Plan>([[defaultPlanName, builtInDefaultPlan]]);
  for (const [name, plan] of Object.entries(input.plans ?? {})) plans.set(name, resolvePlan(name, plan));
  const defaultPlan = input.defaultPlan ?? defaultPlanName;
  if (!plans.has(defaultPlan)) throw new ConfigError(`${file ?? "config"}: defaultPlan "${defaultPlan}" is not in plans`);

  for (const [setting, token] of [["adminToken", input.adminToken], ["metrics.token", input.metrics?.token]] as const) {
    const weak = token === undefined ? null : weakTokenReason(token);
    if (weak) throw new ConfigError(`${file ?? "config"}: ${setting} is too weak: ${weak}; ${generateTokenHint}`);
  }

  if (server.tls && Boolean(server.tls.cert) !== Boolean(server.tls.key)) {
    throw new ConfigError(`${file ?? "config"}: server.tls needs both cert and key (or neither, for the generated pair)`);
  }
  for (const [i, cidr] of (server.trustProxy ?? []).entries()) {
    if (!parseCidr(cidr)) throw new ConfigError(`${file ?? "config"}: invalid CIDR "${cidr}" at server.trustProxy[${i}]`);
  }

  const databaseUrl = process.env.DATABASE_URL || input.database?.url || null;
  const databaseMigrationUrl = process.env.DATABASE_MIGRATION_URL || input.database?.migrationUrl || null;
  if (databaseMigrationUrl && !databaseUrl) {
    throw new ConfigError(`${file ?? "config"}: database.migrationUrl (DATABASE_MIGRATION_URL) needs database.url (DATABASE_URL): the serving role's URL, whose role the migration grants its privileges to`);
  }

  const llama: LlamaSettings = {
    server: input.llama?.server ?? "auto",
    serverBinary: input.llama?.serverBinary ? path.resolve(configDir, input.llama.serverBinary) : null,
  };
  const usingDefaultCatalog = input.models === undefined;
  const modelConfigs = input.models ?? defaultCatalog;
  const seen = new Set<string>();
  for (const [i, model] of modelConfigs.entries()) {
    if (seen.has(model.id)) throw new ConfigError(`${file ?? "config"}: duplicate model id "${model.id}" at models[${i}].id`);
    seen.add(model.id);
    if (model.source && isHubRef(model.source)) {
      try {
        parseHubRef(model.source);
      } catch (err) {
        throw new ConfigError(`${file ?? "config"}: models[${i}].source: ${(err as Error).message}`);
      }
    }
  }

  const models = modelConfigs.map((m, index) => resolveModel(m, { configDir, dataDir, serverTimeoutMs: requestTimeoutMs, engines, llama, file: file ?? "config", index }));
  return {
    configFile: file ? path.resolve(file) : null,
    configDir,
    server: {
      host: overrides.host ?? server.host ?? "127.0.0.1",
      port: overrides.port ?? server.port ?? 8443,
      tls: server.tls?.cert && server.tls.key ? { cert: path.resolve(configDir, server.tls.cert), key: path.resolve(configDir, server.tls.key) } : null,
      ciphers: server.tls?.ciphers ?? defaultCiphers,
      trustProxy: server.trustProxy ?? [],
      shutdownTimeoutMs: parseTimerDuration(server.shutdownTimeout ?? "30s"),
      bodyTimeoutMs: parseTimerDuration(server.bodyTimeout ?? "30s"),
      headerTimeoutMs: parseTimerDuration(server.headerTimeout ?? "10s"),
      requestTimeoutMs,
      trimNativeMemory: server.trimNativeMemory ?? true,
      maxRequestsPerConnection: server.maxRequestsPerConnection ?? 0,
    },
    deployment: input.deployment ?? "shared",
    dataDir,
    logLevel: input.logLevel ?? "info",
    logFormat: input.logFormat ?? null,
    adminToken: input.adminToken ?? null,
    metricsToken: input.metrics?.token ?? null,
    metricsPerAccount: input.metrics?.perAccount ?? false,
    observability: input.metrics?.enabled ?? true,
    keySecret: input.keySecret ?? null,
    databaseUrl,
    databaseMigrationUrl,
    redisUrl: process.env.REDIS_URL || input.redis?.url || null,
    redisOnError: input.redis?.onError ?? "open",
    staleIfErrorMs: parseDuration(input.store?.staleIfError ?? "5m"),
    cache: { maxBytes: input.cache?.maxBytes ?? defaultCacheMemoryBytes },
    batches: {
      leaseMs: parseTimerDuration(input.batches?.leaseTtl ?? "30s"),
      pollMs: parseTimerDuration(input.batches?.pollInterval ?? "1s"),
      fileExpiryMs: expiry(input.batches?.fileExpiry ?? "720h"),
      outputExpiryMs: expiry(input.batches?.outputExpiry ?? "720h"),
    },
    anonymousRateLimit: input.anonymousRateLimit
      ? { requests: input.anonymousRateLimit.requests, windowMs: parseDuration(input.anonymousRateLimit.window), ipv6Prefix: input.anonymousRateLimit.ipv6Prefix ?? 64 }
      : { requests: 300, windowMs: 60_000, ipv6Prefix: 64 },
    adminTokenFailureLimit: input.adminTokenFailureLimit
      ? { requests: input.adminTokenFailureLimit.requests, windowMs: parseDuration(input.adminTokenFailureLimit.window) }
      : { requests: 1000, windowMs: 60_000 },
    console: consoleSettings(input.console, configDir),
    defaultPlan,
    currency: input.currency ?? "USD",
    plans,
    models,
    routes: resolveRoutes(input.routes ?? [], models, file ?? "config"),
    llama,
    pull: input.pull ?? "never",
    usingDefaultCatalog,
  };
}

const expiry = (text: string): number | null => (text === "never" ? null : parseDuration(text));

function consoleSettings(input: ConfigInput["console"] = {}, configDir: string): ConsoleSettings {
  const oidc = input.oidc;
  const lower = (emails: string[] | undefined) => (emails ?? []).map((e) => e.trim().toLowerCase()).filter(Boolean);
  return {
    publicUrl: input.publicUrl ?? null,
    sessionIdleMs: parseDuration(input.sessionIdleTimeout ?? "30m"),
    sessionLifetimeMs: parseDuration(input.sessionLifetime ?? "12h"),
    loginFailureLimit: input.loginFailureLimit
      ? { requests: input.loginFailureLimit.requests, windowMs: parseDuration(input.loginFailureLimit.window) }
      : { requests: 10, windowMs: 15 * 60_000 },
    oidc: oidc
      ? {
          issuer: oidc.issuer,
          clientId: oidc.clientId,
          clientSecret: oidc.clientSecret ?? null,
          redirectUri: oidc.redirectUri ?? null,
          roleClaim: oidc.roleClaim ?? null,
          adminValue: oidc.adminValue ?? "operator-admin",
          viewerValue: oidc.viewerValue ?? "operator-viewer",
          adminEmails: lower(oidc.adminEmails),
          viewerEmails: lower(oidc.viewerEmails),
          caFile: oidc.caFile ? path.resolve(configDir, oidc.caFile) : null,
        }
      : null,
  };
}

/**
 * Reads a YAML or JSON config file (or none, for the embedded defaults), fills in `${ENV}` values, lays the
 * MODELGATE_* variables over it and validates it. `overrides` (the command-line flags) win over all of these.
 */
export function loadConfig(file: string | null | undefined, engines: EngineKinds, overrides: ConfigOverrides = {}, env: NodeJS.ProcessEnv = process.env): AppConfig {
  if (!file) return buildConfig(applyEnvironment({}, env), null, engines, overrides);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read config ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const missing = (name: string, where: string) => new ConfigError(`${file}: environment variable ${name} is not set (used at ${where})`);
  return buildConfig(applyEnvironment(interpolateEnv(parseText(text, file), env, missing), env), file, engines, overrides);
}
