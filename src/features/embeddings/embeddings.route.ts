import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { inferenceErrors } from "../../errors/error.schema.ts";
import { requestContext } from "../request-context.ts";
import { EmbeddingList, EmbeddingsRequest } from "./embeddings.schema.ts";
import { createEmbeddings } from "./embeddings.service.ts";

export default async function embeddingsRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: EmbeddingsRequest }>(
    "/embeddings",
    {
      schema: {
        operationId: "createEmbeddings",
        tags: ["embeddings"],
        summary: "§4.3 embedding vectors, one per input",
        body: Type.Ref(EmbeddingsRequest),
        response: { 200: Type.Ref(EmbeddingList), ...inferenceErrors },
      },
      config: { endpoint: "embeddings" },
    },
    async (request, reply) => createEmbeddings(app.ctx, requestContext(request, reply), request.body),
  );
}
