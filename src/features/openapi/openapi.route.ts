import type { FastifyInstance } from "fastify";
import { buildOpenApiDocument } from "./openapi.document.ts";

export default async function openapiRoutes(app: FastifyInstance): Promise<void> {
  let cached: unknown = null;
  app.get("/v1/openapi.json", { config: { public: true } }, async () => {
    cached ??= buildOpenApiDocument(app);
    return cached;
  });
}
