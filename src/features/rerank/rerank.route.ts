import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { requestContext } from "../request-context.ts";
import { RerankRequestBody, RerankResponse } from "./rerank.schema.ts";
import { rerank } from "./rerank.service.ts";

export default async function rerankRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: RerankRequestBody }>(
    "/rerank",
    {
      schema: {
        operationId: "rerank",
        tags: ["rerank"],
        summary: "§4.5 documents scored against a query, highest first",
        body: Type.Ref(RerankRequestBody),
        response: { 200: Type.Ref(RerankResponse), ...inferenceErrors },
      },
      config: { endpoint: "rerank" },
    },
    async (request, reply) => rerank(app.ctx, requestContext(request, reply), request.body),
  );
}
