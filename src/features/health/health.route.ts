import type { FastifyInstance } from "fastify";

export default async function healthRoutes(app: FastifyInstance): Promise<void> {
  /** Liveness: the process answers. No auth, no model state. */
  app.get("/healthz", { config: { public: true } }, async () => ({ status: "ok" }));

  /** Readiness: every eagerly loaded model is ready. */
  app.get("/readyz", { config: { public: true } }, async (_request, reply) => {
    const models = app.ctx.catalog.stats().map(({ id, state }) => ({ id, state }));
    const ready = app.ctx.catalog.ready();
    return reply.code(ready ? 200 : 503).send({ status: ready ? "ready" : "not_ready", models });
  });
}
