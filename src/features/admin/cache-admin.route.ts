import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { errorResponses } from "../../errors/error.schema.ts";

const PurgeQuery = Type.Object(
  { model: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: "The model or route id whose entries go; every entry when omitted" })) },
  { additionalProperties: false },
);
type PurgeQuery = Static<typeof PurgeQuery>;

const CachePurge = Type.Object({
  object: Type.Literal("cache.purge"),
  model: Type.Union([Type.String(), Type.Null()]),
  deleted: Type.Integer({ description: "Entries removed from the store (Redis: on every replica; memory: on this node)" }),
});

/**
 * `DELETE /admin/v1/cache?model=`: purges the response cache's entries of a model (issue 45), of every account; an
 * operator's call (members may not: an entry may be another account's). With Redis, every replica's entries.
 */
export default async function cacheAdminRoutes(app: FastifyInstance): Promise<void> {
  app.delete<{ Querystring: PurgeQuery }>(
    "/cache",
    { schema: { operationId: "purgeResponseCache", tags: ["admin"], querystring: PurgeQuery, response: { 200: CachePurge, ...errorResponses(400, 401, 403, 429, 503) } } },
    async (request) => {
      const model = request.query.model ?? null;
      let deleted: number;
      try {
        deleted = await app.ctx.responseCache.purge(model);
      } catch (err) {
        request.log.warn({ err, model }, "response cache purge failed");
        throw new AppError("overloaded", { message: "The response cache's store is unreachable; retry shortly.", retryAfterMs: 1000 });
      }
      request.log.info({ model, deleted }, "response cache purged");
      return { object: "cache.purge" as const, model, deleted };
    },
  );
}
