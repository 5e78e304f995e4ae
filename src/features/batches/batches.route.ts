import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { grantsEndpoint } from "../../auth/key-grants.ts";
import { AppError } from "../../errors/app-error.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { BatchRecord } from "../../store/batches.repo.ts";
import { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { EmbeddingsRequest } from "../embeddings/embeddings.schema.ts";
import { assertBatchAccess, endpointOfBatch, newId, notFound, seconds } from "./batch-access.ts";
import { parseBatchInput } from "./batch-input.ts";
import { BatchList, BatchListQuery, BatchObject, CreateBatchRequest, IdParams, type BatchEndpoint } from "./batches.schema.ts";

/** The completion window ("24h", the only one the API takes). */
const completionWindowMs = 24 * 3_600_000;

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
const bodySchemas = { "/v1/chat/completions": ChatCompletionRequest, "/v1/embeddings": EmbeddingsRequest } as const;

/** POST/GET /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel; the lines run in the BatchRunner. */
export default async function batchesRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;
  const deployment = app.ctx.config.deployment;

  app.post<{ Body: CreateBatchRequest }>(
    "/batches",
    {
      schema: {
        operationId: "createBatch",
        tags: ["batches"],
        summary: "Create a batch from an uploaded file; every line is validated first (a bad line: status failed, errors.data[].line)",
        body: Type.Ref(CreateBatchRequest),
        response: { 200: Type.Ref(BatchObject), ...batchErrors },
      },
    },
    async (request) => {
      const auth = request.auth!;
      const { input_file_id, endpoint } = request.body;
      if (!grantsEndpoint(auth, endpointOfBatch[endpoint], deployment)) {
        throw new AppError("model_not_in_plan", { param: "endpoint", message: `This key's plan does not include the ${endpointOfBatch[endpoint]} endpoint.` });
      }
      const file = await store().files.get(auth.accountId, input_file_id);
      if (!file) throw notFound("file", input_file_id, "input_file_id");
      if (file.purpose !== "batch") throw new AppError("invalid_parameter", { param: "input_file_id", message: `The file '${input_file_id}' has purpose '${file.purpose}', not 'batch'.` });
      // The endpoint's own body schema, compiled by the same validator as its route (defaults filled in).
      const validator = request.compileValidationSchema(Type.Ref(bodySchemas[endpoint]));
      const parsed = parseBatchInput(await store().files.content(file.id), endpoint, (body) => {
        if (validator(body)) return null;
        return toAppError({ validation: validator.errors }).appError;
      });
      const now = Date.now();
      const failed = parsed.errors.length > 0;
      const parallel = [...parsed.models].map((m) => (app.ctx.catalog.find(m) ?? app.ctx.catalog.route(m)?.asModel)?.entry.parallel ?? 1);
      const batch: BatchRecord = {
        id: newId("batch_"),
        accountId: auth.accountId,
        keyId: auth.keyId,
        endpoint,
        inputFileId: file.id,
        completionWindow: request.body.completion_window,
        status: failed ? "failed" : "in_progress",
        metadata: request.body.metadata ?? null,
        errors: failed ? parsed.errors : null,
        outputFileId: null,
        errorFileId: null,
        total: failed ? 0 : parsed.lines.length,
        completed: 0,
        failed: 0,
        concurrency: Math.max(1, ...parallel),
        createdAt: now,
        inProgressAt: failed ? null : now,
        expiresAt: now + completionWindowMs,
        finalizingAt: null,
        completedAt: null,
        failedAt: failed ? now : null,
        expiredAt: null,
        cancellingAt: null,
        cancelledAt: null,
      };
      await store().batches.insert(batch, failed ? [] : parsed.lines);
      if (!failed) app.batchRunner?.wake();
      return batchObject(batch);
    },
  );

  app.get<{ Querystring: BatchListQuery }>(
    "/batches",
    { schema: { operationId: "listBatches", tags: ["batches"], summary: "The account's batches, newest first", querystring: BatchListQuery, response: { 200: Type.Ref(BatchList), ...batchErrors } } },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const limit = Number(request.query.limit ?? 20);
      const rows = await store().batches.list(auth.accountId, { limit: limit + 1, after: request.query.after });
      const data = rows.slice(0, limit).map(batchObject);
      return { object: "list" as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/batches/:id",
    { schema: { operationId: "retrieveBatch", tags: ["batches"], summary: "A batch of the account, with its status and request_counts", params: IdParams, response: { 200: Type.Ref(BatchObject), ...batchErrors } } },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const batch = await store().batches.get(auth.accountId, request.params.id);
      if (!batch) throw notFound("batch", request.params.id, "batch_id");
      return batchObject(batch);
    },
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
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const batch = await store().batches.requestCancel(auth.accountId, request.params.id, Date.now());
      if (!batch) throw notFound("batch", request.params.id, "batch_id");
      app.batchRunner?.wake();
      return batchObject(batch);
    },
  );
}
