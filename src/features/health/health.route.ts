import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest, FastifyReply } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { retryHeaders, toEnvelope } from "../../errors/envelope.ts";
import { ErrorEnvelope, errorResponses } from "../../errors/error.schema.ts";
import { authenticateMetrics } from "../../auth/admin-auth.plugin.ts";

/** Upstream pools are listed with their upstreams' states but never decide readiness (docs/engines.md, "Upstream pools"). */
const models = Type.Optional(
  Type.Array(
    Type.Object({ id: Type.String(), state: Type.String(), upstreams: Type.Optional(Type.Array(Type.Object({ url: Type.String(), state: Type.String() }))) }),
  ),
);
/**
 * The shared services, reported but not deciding readiness: a node that lost its database still serves keys it has
 * seen, and taking every replica out of its load balancer at once would be the worse outage.
 */
const dependencies = {
  store: Type.Optional(
    Type.Object({ state: Type.Union([Type.Literal("ok"), Type.Literal("unreachable")]), since: Type.Union([Type.String(), Type.Null()]) }),
  ),
  redis: Type.Optional(Type.Union([Type.Literal("ok"), Type.Literal("unreachable"), Type.Literal("not_configured")])),
};
const detailsNote = "models, store and redis only with the admin token or metrics.token";
const Ready = Type.Object({ status: Type.Literal("ready"), models, ...dependencies }, { description: `Ready; ${detailsNote}` });
/** Not ready: the §7 envelope like every non-2xx answer, with the models' states beside it for a token holder. */
const NotReady = Type.Object(
  { error: Type.Index(ErrorEnvelope, ["error"]), status: Type.Literal("not_ready"), models, ...dependencies },
  { description: `Not ready (model_loading, see Retry-After); ${detailsNote}` },
);

/**
 * Whether the caller may see readiness details: anyone may ask whether the node is ready (load balancers send no
 * credentials), but model names, upstream URLs and the state of the store are for operators. A token that is sent
 * is checked, and a wrong one refused and counted, exactly as on /metrics, so /readyz is no free oracle for guessing it.
 */
async function mayReadDetails(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const sentToken = request.headers.authorization !== undefined || request.headers["x-admin-token"] !== undefined;
  if (!sentToken) return false;
  await authenticateMetrics(request, reply);
  return true;
}

export default async function healthRoutes(app: FastifyInstance): Promise<void> {
  /** Liveness: the process answers. No credentials, no model state. */
  app.get(
    "/healthz",
    { schema: { operationId: "healthz", tags: ["health"], response: { 200: Type.Object({ status: Type.Literal("ok") }) } } },
    async () => ({ status: "ok" as const }),
  );

  /** Readiness: every eagerly loaded model is ready. */
  app.get(
    "/readyz",
    { schema: { operationId: "readyz", tags: ["health"], response: { 200: Ready, 503: NotReady, ...errorResponses(401, 429) } } },
    async (request, reply) => {
      const details = await mayReadDetails(request, reply);
      const ready = app.ctx.catalog.ready();
      if (!details) {
        if (ready) return { status: "ready" as const };
        const error = new AppError("model_loading", { message: "Not ready: a model is still loading or unavailable.", retryAfterMs: 5000 });
        return reply.code(503).headers(retryHeaders(5000)).send({ ...toEnvelope(error), status: "not_ready" as const });
      }
      const models = app.ctx.catalog
        .stats()
        .map(({ id, state, upstreams }) => ({ id, state, ...(upstreams ? { upstreams: upstreams.map(({ url, state }) => ({ url, state })) } : {}) }));
      const store = app.keyStore.health.state;
      const redis = !app.ctx.config.redisUrl ? ("not_configured" as const) : app.limiterHealthy() ? ("ok" as const) : ("unreachable" as const);
      if (ready) return { status: "ready" as const, models, store, redis };
      const waiting = models.filter((m) => m.state !== "ready").map((m) => `${m.id} (${m.state})`);
      const error = new AppError("model_loading", { message: `Not ready: ${waiting.join(", ")}.`, retryAfterMs: 5000 });
      return reply.code(503).headers(retryHeaders(5000)).send({ ...toEnvelope(error), status: "not_ready" as const, models, store, redis });
    },
  );
}
