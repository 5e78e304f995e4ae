import type { FastifyInstance } from "fastify";
import { buildOpenApiDocument } from "./openapi.document.ts";

export default async function openapiRoutes(app: FastifyInstance): Promise<void> {
  let cached: unknown = null;
  // Under /v1 like the rest of the API, so it takes a key and is rate limited (§1, §8).
  app.get("/v1/openapi.json", async () => {
    cached ??= buildOpenApiDocument(app);
    return cached;
  });
}
