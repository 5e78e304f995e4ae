import type { FastifyInstance } from "fastify";
import { requestSignal } from "../../http/request-signal.ts";
import { RerankRequestBody, RerankResponse, rerankErrors } from "./rerank.schema.ts";
import { rerank } from "./rerank.service.ts";

export default async function rerankRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: RerankRequestBody }>(
    "/v1/rerank",
    { schema: { body: RerankRequestBody, response: { 200: RerankResponse, ...rerankErrors } }, config: { endpoint: "rerank" } },
    async (request, reply) =>
      rerank(app.ctx, request.auth!, request.body, (deadlineMs) => requestSignal(request, reply, deadlineMs)),
  );
}
