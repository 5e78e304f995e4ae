import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { sizeOnDisk } from "../../catalog/local-state.ts";
import { missingFilesMessage, pullCommandFor } from "../../config/model-files.ts";
import { AppError } from "../../errors/app-error.ts";
import type { UpstreamStats } from "../../engines/engine.ts";
import type { ModelRunner } from "../../scheduler/model-runner.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AdminModel, AdminModelList } from "./admin.schema.ts";

export const ModelIdParams = Type.Object({ id: Type.String({ minLength: 1 }) }, { additionalProperties: false });
export type ModelIdParams = Static<typeof ModelIdParams>;

export const LoadQuery = Type.Object(
  { wait: Type.Optional(Type.Union([Type.Literal("true"), Type.Literal("false")], { description: "wait until ready or failed" })) },
  { additionalProperties: false },
);
export type LoadQuery = Static<typeof LoadQuery>;

/** A prefix-affinity pool's placements over its upstreams; nothing for other models. */
function affinitySummary(upstreams: UpstreamStats[] | undefined): { affinity?: Static<typeof AdminModel>["affinity"] } {
  const placed = upstreams?.flatMap((u) => (u.affinity ? [u.affinity] : []));
  if (!placed?.length) return {};
  const owner = placed.reduce((n, p) => n + p.owner, 0);
  const spills = placed.reduce((n, p) => n + p.spill, 0);
  const retries = placed.reduce((n, p) => n + p.retry, 0);
  return { affinity: { placements: owner + spills, spills, retries, hitRatio: owner + spills > 0 ? owner / (owner + spills) : null } };
}

/** A model as the admin API shows it: its entry and the runner's live state (missing, unloaded, loading, ready, failed). */
function view(runner: ModelRunner): Static<typeof AdminModel> {
  const stats = runner.stats();
  const entry = runner.entry;
  return {
    id: entry.id,
    object: "model" as const,
    engine: entry.engine,
    source: entry.source,
    path: entry.path,
    state: stats.state,
    error: stats.error,
    active: stats.active,
    queueDepth: stats.queueDepth,
    preparing: stats.preparing,
    parallel: stats.parallel,
    load: entry.load,
    keepAliveMs: entry.keepAliveMs,
    capabilities: entry.capabilities,
    sizeBytes: entry.path && runner.filesPresent() ? sizeOnDisk(entry.path) : null,
    pullCommand: runner.filesPresent() ? null : pullCommandFor(entry),
    tenants: stats.tenants,
    ...(stats.upstreams ? { upstreams: stats.upstreams } : {}),
    ...affinitySummary(stats.upstreams),
    ...(stats.promptCache
      ? { promptCache: { ...stats.promptCache, hitRatio: stats.promptCache.promptTokens > 0 ? stats.promptCache.reusedTokens / stats.promptCache.promptTokens : null } }
      : {}),
  };
}

/**
 * Runtime model management under /admin/v1 (admin token, not API keys):
 * - `GET /admin/v1/models`: every configured model with its load state;
 * - `POST /admin/v1/models/{id}/load`: starts loading (202, state `loading`; requests meanwhile get 503
 *   model_loading) or, with `?wait=true`, answers once the model is ready (200) or failed (500);
 * - `POST /admin/v1/models/{id}/unload`: waits for the model's in-flight requests, then frees it (200).
 * Ids containing `/` are sent URL-encoded (`%2F`).
 */
export default async function modelsAdminRoutes(app: FastifyInstance): Promise<void> {
  const tags = ["admin"];
  const errors = errorResponses(401, 404, 429, 500);
  const one = { 200: Type.Ref(AdminModel), 202: Type.Ref(AdminModel), ...errors };

  app.get("/models", { schema: { operationId: "listAdminModels", tags, response: { 200: Type.Ref(AdminModelList), ...errors } } }, async () => ({
    object: "list" as const,
    data: app.ctx.catalog.list().map(view),
  }));

  app.get<{ Params: ModelIdParams }>(
    "/models/:id",
    { schema: { operationId: "getAdminModel", tags, params: ModelIdParams, response: one } },
    async (request) => view(app.ctx.catalog.get(request.params.id)),
  );

  app.post<{ Params: ModelIdParams; Querystring: LoadQuery }>(
    "/models/:id/load",
    { schema: { operationId: "loadModel", tags, params: ModelIdParams, querystring: LoadQuery, response: one } },
    async (request, reply) => {
      const runner = app.ctx.catalog.get(request.params.id);
      // The files may have been pulled since start (a quant's exact file name is only known once it is on disk).
      if (runner.refresh() === "missing") throw new AppError("model_not_found", { param: "model", message: missingFilesMessage(runner.entry) });
      const loading = runner.load();
      if (request.query.wait === "true") {
        await loading;
        if (runner.state === "failed") {
          throw new AppError("internal_error", { message: `The model '${runner.entry.id}' failed to load: ${runner.stats().error}` });
        }
      }
      return reply.code(runner.state === "ready" ? 200 : 202).send(view(runner));
    },
  );

  app.post<{ Params: ModelIdParams }>(
    "/models/:id/unload",
    { schema: { operationId: "unloadModel", tags, params: ModelIdParams, response: one } },
    async (request) => {
      const runner = app.ctx.catalog.get(request.params.id);
      await runner.unload();
      return view(runner);
    },
  );
}
