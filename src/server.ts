import path from "node:path";
import { LocalConcurrency } from "./plugins/concurrency-limits.ts";
import { RedisConcurrency } from "./plugins/rate-limit/redis-concurrency.ts";
import { SharedRedis } from "./plugins/rate-limit/shared-redis.ts";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { AppConfig } from "./config/app-config.ts";
import type { AppContext } from "./app-context.ts";
import { ModelCatalog } from "./catalog/model-catalog.ts";
import { builtInEngines, type EngineRegistry } from "./engines/registry.ts";
import { loadOrCreateTls, type TlsMaterial } from "./http/tls.ts";
import { RouteTable } from "./http/route-table.ts";
import { sharedSerializers } from "./http/shared-serializers.ts";
import { lazyValidators } from "./http/lazy-validators.ts";
import { OpenStreams } from "./http/sse.ts";
import { AppError } from "./errors/app-error.ts";
import { requestIdFor, requestIdPlugin } from "./plugins/request-id.ts";
import { proxyPlugin } from "./plugins/proxy.ts";
import { connectionReusePlugin } from "./plugins/connection-reuse.ts";
import { errorHandlerPlugin } from "./plugins/error-handler.ts";
import { requestBodyGuardPlugin } from "./plugins/request-body-guard.ts";
import { clientErrorHandler, expectationFailed, frameworkErrorHandler, refuseMissingHost } from "./plugins/client-errors.ts";
import { authPlugin } from "./auth/api-key.plugin.ts";
import { adminAuthPlugin } from "./auth/admin-auth.plugin.ts";
import { revocationsPlugin } from "./plugins/revocations.ts";
import { rateLimitPlugin } from "./plugins/rate-limit.ts";
import { TokenMeter } from "./plugins/token-meter.ts";
import { ResponseCacheStore } from "./plugins/response-cache/response-cache.ts";
import { openStore } from "./store/store.ts";
import { UsageRecorder } from "./store/usage-recorder.ts";
import { registerOpenApi } from "./features/openapi/openapi-document.ts";
import { featureSchemas } from "./features/index.ts";
import v1Scope from "./scopes/v1.scope.ts";
import anthropicScope from "./scopes/anthropic.scope.ts";
import adminScope from "./scopes/admin.scope.ts";
import publicScope from "./scopes/public.scope.ts";
import fallbackScope from "./scopes/fallback.scope.ts";
import metricsScope from "./scopes/metrics.scope.ts";
import consoleScope from "./scopes/console.scope.ts";
import { Metrics } from "./metrics/metrics.ts";
import { ConnectionDrain } from "./http/connection-drain.ts";
import { observabilityPlugin } from "./plugins/observability.ts";
import { startTracing } from "./telemetry/tracing.ts";
import { BatchRunner } from "./features/batches/batch-runner.ts";
import { StorageSweeper } from "./features/batches/storage-sweeper.ts";

declare module "fastify" {
  interface FastifyInstance {
    routeTable: RouteTable;
  }
}

export interface ServerOptions {
  /** The engine kinds to build models with (the config must have been built with the same registry). */
  engines?: EngineRegistry;
  /** A pino destination or `false` to silence logs. */
  logger?: boolean | Record<string, unknown>;
}

export interface Server {
  app: FastifyInstance;
  ctx: AppContext;
  tls: TlsMaterial;
  /** Binds and resolves with the bound port. */
  listen(): Promise<number>;
  /** Stops accepting, drains in-flight requests up to the shutdown timeout, then releases everything. */
  close(): Promise<void>;
}

/**
 * Builds the Fastify app from config: the plugins every request passes (request id, client address, error
 * shaping) and the shared machinery (keys, limits), then one scope per kind of caller, each with its own checks:
 * /v1 (API keys), /admin/v1 (the admin token), public paths, and the fallback for unknown paths.
 */
export async function buildServer(config: AppConfig, options: ServerOptions = {}): Promise<Server> {
  const tls = await loadOrCreateTls(config.server.tls, config.dataDir);
  const { headerTimeoutMs, bodyTimeoutMs } = config.server;
  const app = Fastify({
    https: {
      cert: tls.cert,
      key: tls.key,
      minVersion: "TLSv1.2",
      ciphers: config.server.ciphers,
      headersTimeout: headerTimeoutMs,
      // Node checks its header and request timeouts this often (its default, 30 s, would let a slow client hold a
      // connection well past headerTimeout).
      connectionsCheckingInterval: Math.min(1000, headerTimeoutMs),
      // A missing Host is refused in the §7 envelope (plugins/client-errors.ts), not by Node's bare 400.
      requireHostHeader: false,
    },
    // A backstop only: the body timeout (plugins/body-limit.ts) answers a slow body with a 408 first.
    requestTimeout: headerTimeoutMs + bodyTimeoutMs + 5000,
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler,
    logger:
      options.logger === false
        ? false
        : {
            level: config.logLevel,
            redact: { paths: ["req.headers.authorization", "req.headers[\"x-api-key\"]", "req.headers[\"x-admin-token\"]"], censor: "[redacted]" },
            // The path, never the query string: a client may put a key there (?api_key=...).
            serializers: { req: (req: { method: string; url: string; ip?: string }) => ({ method: req.method, path: req.url.split("?")[0], remoteAddress: req.ip }) },
            ...(typeof options.logger === "object" ? options.logger : {}),
          },
    genReqId: requestIdFor,
    // One access-log line per request instead of Fastify's two (plugins/observability.ts).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 2 ** 32,
    forceCloseConnections: "idle",
    return503OnClosing: false,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false } },
    // Fastify types buildValidator as ajv's own compile, which the function it calls is not (lazy-validators.ts).
    schemaController: { compilersFactory: { buildSerializer: sharedSerializers(), buildValidator: lazyValidators() as never } },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const closers: (() => Promise<void> | void)[] = [];
  // The metrics read the catalog's runners at scrape time; the runners report their events to the metrics.
  let catalog: ModelCatalog | null = null;
  const metrics = new Metrics(() => catalog, config.metricsPerAccount);
  const tracing = await startTracing();
  if (tracing) closers.push(() => tracing.flush());
  const store = await openStore(config, app.log);
  closers.push(() => store.close());
  // Usage is journaled in the data dir until written: a kill -9 loses none of it (issue 47).
  const usage = new UsageRecorder(store, app.log, path.join(config.dataDir, "usage-journal"));
  closers.push(() => usage.close());
  store.health.onUnreachable(() => metrics.storeErrors.inc({ store: "database" }));
  catalog = new ModelCatalog(config.models, options.engines ?? builtInEngines(), app.log, metrics.runnerObserver, config.routes);
  closers.push(() => catalog.unloadAll());
  const streams = new OpenStreams();
  const drain = new ConnectionDrain(app.server);
  // Every limiter shares its counts with the other replicas through this Redis, under one outage policy.
  const redis = config.redisUrl ? await SharedRedis.connect(config.redisUrl, { onError: config.redisOnError, log: app.log }) : null;
  if (redis) {
    redis.onFailure(() => metrics.storeErrors.inc({ store: "redis" }));
    closers.push(() => redis.close());
  }
  // Shared by the replicas when Redis is configured and a plan limits concurrency; else counted on this node.
  const limitsConcurrency = [...config.plans.values()].some((p) => p.maxConcurrent !== null || p.maxConcurrentPerAccount !== null);
  const concurrency = redis && limitsConcurrency ? new RedisConcurrency(redis) : new LocalConcurrency();
  const tokens = TokenMeter.create({
    config,
    redis,
    log: app.log,
    periodTotals: (accountId, firstDay, lastDay) => store.health.run(() => store.usage.periodTotals(accountId, firstDay, lastDay)),
    flushUsage: () => usage.flush(),
    budgetUsed: (accountId, ratio) => metrics.budgetUsed.set({ account: accountId }, ratio),
  });
  closers.push(() => tokens.close());
  const responseCache = await ResponseCacheStore.create({ config, log: app.log, onStoreError: () => metrics.storeErrors.inc({ store: "redis" }) });
  closers.push(() => responseCache.close());
  const ctx: AppContext = { config, catalog, usage, streams, metrics, concurrency, tokens, responseCache, onClose: (fn) => closers.push(fn) };
  app.decorate("ctx", ctx);
  // The Batch API's worker: stopped first at shutdown (closers run in reverse), before the models and the store.
  const batchRunner = await BatchRunner.create(ctx, store, app.log.child({ component: "batches" }));
  app.decorate("batchRunner", batchRunner);
  closers.push(() => batchRunner.stop());
  const storageSweeper = new StorageSweeper(store, app.log.child({ component: "storage" }));
  closers.push(() => storageSweeper.stop());

  const routeTable = new RouteTable();
  app.decorate("routeTable", routeTable);
  app.addHook("onRoute", (route) => routeTable.add(route.method, route.url, route.schema as Record<string, unknown> | undefined));

  await app.register(adminAuthPlugin, { store });
  await app.register(requestIdPlugin);
  if (config.server.maxRequestsPerConnection > 0) await app.register(connectionReusePlugin, { maxRequests: config.server.maxRequestsPerConnection });
  if (config.observability) await app.register(observabilityPlugin, { metrics });
  await app.register(proxyPlugin, { trustProxy: config.server.trustProxy });
  await app.register(errorHandlerPlugin);
  await app.register(requestBodyGuardPlugin);
  await app.register(rateLimitPlugin, { redis });
  app.addHook("onRequest", refuseMissingHost);
  app.server.on("checkExpectation", expectationFailed(app));
  await app.register(authPlugin, { store });
  await app.register(revocationsPlugin, { redisUrl: config.redisUrl, store });
  await registerOpenApi(app, featureSchemas);
  await app.register(v1Scope, { prefix: "/v1" });
  await app.register(anthropicScope, { prefix: "/v1/messages" });
  await app.register(adminScope, { prefix: "/admin/v1" });
  await app.register(consoleScope);
  await app.register(publicScope);
  if (config.observability) await app.register(metricsScope);
  await app.register(fallbackScope);
  batchRunner.start();
  storageSweeper.start();

  let closing: Promise<void> | null = null;
  return {
    app,
    ctx,
    tls,
    async listen() {
      await app.listen({ host: config.server.host, port: config.server.port });
      const address = app.server.address();
      return typeof address === "object" && address ? address.port : config.server.port;
    },
    close() {
      closing ??= (async () => {
        const timer = setTimeout(() => {
          app.log.warn({ streams: streams.size }, "shutdown timeout reached; ending open streams and closing remaining connections");
          // One error event first, so clients retry elsewhere instead of reading a reset.
          void streams
            .failAll(new AppError("overloaded", { message: "The server is shutting down; retry the request.", retryAfterMs: 1000 }))
            .then(() => drain.resetBusy());
        }, config.server.shutdownTimeoutMs);
        timer.unref();
        drain.start();
        await app.close();
        clearTimeout(timer);
        for (const close of closers.reverse()) await close();
      })();
      return closing;
    },
  };
}
