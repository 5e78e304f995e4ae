import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { documentCallers, metricsCallers } from "../auth/openapi-security.ts";
import { errorResponses } from "../errors/error.schema.ts";
import { authenticateMetrics } from "../auth/admin-auth.plugin.ts";

/**
 * GET /metrics, the Prometheus text format, on the one HTTPS listener (§1: there is no plain-HTTP port). It takes
 * the admin token or `metrics.token`; without either, 401 with the §7 envelope.
 */
export default async function metricsScope(app: FastifyInstance): Promise<void> {
  app.addHook("onRequest", authenticateMetrics);
  documentCallers(app, metricsCallers);
  app.get(
    "/metrics",
    {
      schema: {
        operationId: "metrics",
        tags: ["admin"],
        summary: "Prometheus metrics (admin token or metrics.token)",
        response: { 200: { description: "Prometheus text format 0.0.4", content: { "text/plain": { schema: Type.String() } } }, ...errorResponses(401, 429) },
      },
    },
    async (_request, reply) => {
      const { registry } = app.ctx.metrics;
      return reply.type(registry.contentType).send(await registry.metrics());
    },
  );
}
