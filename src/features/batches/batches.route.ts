import { Type, type TSchema } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { errorResponses } from "../../errors/error.schema.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { BatchRecord } from "../../store/batches.repo.ts";
import { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { EmbeddingsRequest } from "../embeddings/embeddings.schema.ts";
import { foundOr404, requireBatchAccess, seconds } from "./batch-access.ts";
import { createBatch } from "./batch-create.ts";
import { BatchList, BatchListQuery, BatchObject, CreateBatchRequest, IdParams, type BatchEndpoint } from "./batches.schema.ts";

export function batchObject(b: BatchRecord): BatchObject {
  return {
    id: b.id,
    object: "batch",
    endpoint: b.endpoint as BatchEndpoint,
    errors: b.errors === null ? null : { object: "list", data: b.errors },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: seconds(b.createdAt)!,
    in_progress_at: seconds(b.inProgressAt),
    expires_at: seconds(b.expiresAt),
    finalizing_at: seconds(b.finalizingAt),
    completed_at: seconds(b.completedAt),
    failed_at: seconds(b.failedAt),
    expired_at: seconds(b.expiredAt),
    cancelling_at: seconds(b.cancellingAt),
    cancelled_at: seconds(b.cancelledAt),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
  };
}

const batchErrors = errorResponses(400, 401, 403, 404, 429, 500, 503);
/** What Fastify's validator compiler (Ajv) makes of a schema. */
type BodyValidator = { (body: unknown): boolean; errors?: unknown[] | null };

const bodySchemas: Record<BatchEndpoint, TSchema> = { "/v1/chat/completions": Type.Ref(ChatCompletionRequest), "/v1/embeddings": Type.Ref(EmbeddingsRequest) };

/** POST/GET /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel; the lines run in the BatchRunner. */
export default async function batchesRoutes(app: FastifyInstance): Promise<void> {
  requireBatchAccess(app);
  const store = () => app.keyStore;
  // Each endpoint's own body schema, compiled by the validator compiler of its route (defaults filled in) once the
  // server is ready: a compile takes tens of milliseconds, which no request should wait for.
  const validators = new Map<BatchEndpoint, BodyValidator>();
  app.addHook("onReady", async () => {
    const compile = app.validatorCompiler!;
    for (const [endpoint, schema] of Object.entries(bodySchemas)) {
      validators.set(endpoint as BatchEndpoint, compile({ schema, method: "POST", url: "/v1/batches", httpPart: "body" }) as BodyValidator);
    }
  });

  app.post<{ Body: CreateBatchRequest }>(
    "/batches",
    {
      schema: {
        operationId: "createBatch",
        tags: ["batches"],
        summary: "Create a batch from an uploaded file; every line is validated first (a bad line: status failed, errors.data[].line)",
        body: Type.Ref(CreateBatchRequest),
        response: { 200: Type.Ref(BatchObject), ...errorResponses(400, 401, 403, 404, 413, 429, 500, 503) },
      },
    },
    async (request) => {
      const validator = validators.get(request.body.endpoint)!;
      const validate = (body: Record<string, unknown>) => (validator(body) ? null : toAppError({ validation: validator.errors }).appError);
      const deps = { ctx: app.ctx, store: store(), wake: () => app.batchRunner?.wake() };
      return batchObject(await createBatch(deps, request.auth!, request.body, validate));
    },
  );

  app.get<{ Querystring: BatchListQuery }>(
    "/batches",
    { schema: { operationId: "listBatches", tags: ["batches"], summary: "The account's batches, newest first", querystring: BatchListQuery, response: { 200: Type.Ref(BatchList), ...batchErrors } } },
    async (request) => {
      const auth = request.auth!;
      const limit = Number(request.query.limit ?? 20);
      const rows = await store().batches.list(auth.accountId, { limit: limit + 1, after: request.query.after });
      const data = rows.slice(0, limit).map(batchObject);
      return { object: "list" as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/batches/:id",
    { schema: { operationId: "retrieveBatch", tags: ["batches"], summary: "A batch of the account, with its status and request_counts", params: IdParams, response: { 200: Type.Ref(BatchObject), ...batchErrors } } },
    async (request) => batchObject(await foundOr404("batch", request.params.id, store().batches.get(request.auth!.accountId, request.params.id))),
  );

  app.post<{ Params: { id: string } }>(
    "/batches/:id/cancel",
    {
      schema: {
        operationId: "cancelBatch",
        tags: ["batches"],
        summary: "Cancel a batch: cancelling, then cancelled once the lines running have stopped (their results so far are kept)",
        params: IdParams,
        response: { 200: Type.Ref(BatchObject), ...batchErrors },
      },
    },
    async (request) => {
      const batch = await foundOr404("batch", request.params.id, store().batches.requestCancel(request.auth!.accountId, request.params.id, Date.now()));
      if (batch.status === "cancelling") await app.batchRunner?.cancel(batch.id);
      return batchObject(batch);
    },
  );
}
