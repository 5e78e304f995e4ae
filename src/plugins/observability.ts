import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { Histogram } from "prom-client";
import type { CountedSeries } from "../metrics/counted-series.ts";
import { freshOutcome, type RequestOutcome } from "../http/request-outcome.ts";
import type { Metrics } from "../metrics/metrics.ts";

declare module "fastify" {
  interface FastifyRequest {
    outcome: RequestOutcome;
  }
}

/** nginx's status for a client that closed the connection before its answer ended. */
const clientClosed = 499;

/** The route the request matched, or a fixed word: never the raw URL (its query string may hold a key). */
function routeOf(url: string | undefined, status: number): string {
  return url ?? (status === 404 ? "(unknown)" : "(none)");
}

/**
 * One access-log line per request (replacing Fastify's two) and the request-level metrics, both written when the
 * response is done. The line carries ids, route, status, error code, key id and display prefix (never the key),
 * account, model (the entry that served), the model route the client named with its fallbacks and their reasons,
 * endpoint, tokens, TTFT, duration, bytes and client address.
 */
export const observabilityPlugin = fp(
  async (app, opts: { metrics: Metrics }) => {
    const { metrics } = opts;
    // The per-request series, made once per label set (prom-client's children still hash their labels on each call).
    const requestSeries = new Map<string, { count: CountedSeries; duration: Histogram.Internal<"endpoint" | "model"> }>();
    const series = (endpoint: string, model: string, status: string, code: string) => {
      const key = `${endpoint}\u0000${model}\u0000${status}\u0000${code}`;
      let found = requestSeries.get(key);
      if (!found) {
        found = { count: metrics.requestCount(key, () => ({ endpoint, model, status, code })), duration: metrics.requestDuration.labels({ endpoint, model }) };
        requestSeries.set(key, found);
      }
      return found;
    };
    app.decorateRequest("outcome", null as unknown as RequestOutcome);
    app.addHook("onRequest", (request, reply, done) => {
      request.outcome = freshOutcome(request.raw.socket?.bytesWritten ?? 0);
      // A client that leaves before its answer ends (a stream cut short) gets no onResponse: its line says 499,
      // nginx's "client closed request".
      reply.raw.once("close", () => {
        if (!reply.raw.writableFinished) record(request, clientClosed);
      });
      done();
    });
    app.addHook("onResponse", (request, reply, done) => {
      record(request, reply.statusCode);
      done();
    });

    function record(request: FastifyRequest, status: number): void {
      const outcome = request.outcome;
      if (!outcome || outcome.recorded) return;
      outcome.recorded = true;
      const ms = performance.now() - outcome.started;
      // A getter that builds a new object on every read: read once.
      const route = request.routeOptions;
      const endpoint = route.config?.endpoint ?? route.url ?? "(none)";
      const model = outcome.model ?? "";
      const code = outcome.errorCode ?? (status >= 400 && status !== clientClosed ? "unknown" : "");
      const { count, duration } = series(endpoint, model, String(status), code);
      count.inc();
      duration.observe(ms / 1000);
      if (status === 413) metrics.tooLarge.inc({ endpoint });
      const auth = request.auth;
      const limited = code === "rate_limit_exceeded" ? "limited" : "allowed";
      if (auth) metrics.limiterDecision(auth.plan.name, limited).inc();
      else if (route.url?.startsWith("/v1") || status === 401) metrics.limiterDecision(null, limited).inc();
      const tokens = outcome.promptTokens !== null;
      // Always the same fields in the same order (one object shape for pino to serialize); pino leaves out those
      // that are undefined.
      request.log.info(
        {
          method: request.method,
          route: routeOf(route.url, status),
          status,
          code: code || undefined,
          keyId: auth?.keyId,
          keyPrefix: auth?.keyPrefix,
          account: auth?.accountId,
          model: outcome.model || undefined,
          modelRoute: outcome.route ?? undefined,
          fallbacks: outcome.route ? outcome.fallbackReasons.length : undefined,
          fallbackReason: outcome.fallbackReasons.length > 0 ? outcome.fallbackReasons.join(",") : undefined,
          endpoint: route.config?.endpoint,
          promptTokens: tokens ? outcome.promptTokens : undefined,
          completionTokens: tokens ? outcome.completionTokens : undefined,
          cache: outcome.cache ?? undefined,
          ttftMs: outcome.ttftMs !== null ? Math.round(outcome.ttftMs * 10) / 10 : undefined,
          queueMs: outcome.queueMs !== null ? Math.round(outcome.queueMs * 10) / 10 : undefined,
          ms: Math.round(ms * 10) / 10,
          bytesIn: Number(request.headers["content-length"] ?? 0) || 0,
          // What the connection carried for this response, headers included (streams have no content-length).
          bytesOut: (request.raw.socket?.bytesWritten ?? 0) - outcome.writtenBefore,
          client: request.ip,
        },
        "request",
      );
    }
  },
  { name: "observability" },
);
