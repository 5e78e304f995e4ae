import { Readable } from "node:stream";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import multipart from "@fastify/multipart";
import { errorResponses } from "../../errors/error.schema.ts";
import type { FileRecord } from "../../store/files.repo.ts";
import { foundOr404, requireBatchAccess, seconds } from "./batch-access.ts";
import { receiveFile } from "./file-upload.ts";
import { FileDeleted, FileList, FileListQuery, FileObject, FileUploadForm, IdParams } from "./batches.schema.ts";

const fileErrors = errorResponses(400, 401, 403, 404, 429, 500, 503);

export function fileObject(file: FileRecord): FileObject {
  return {
    id: file.id,
    object: "file",
    bytes: file.bytes,
    created_at: seconds(file.createdAt)!,
    filename: file.filename,
    purpose: file.purpose as FileObject["purpose"],
    status: "processed",
    expires_at: seconds(file.expiresAt),
    status_details: null,
  };
}

/** POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content: an account's Batch API files. */
export default async function filesRoutes(app: FastifyInstance): Promise<void> {
  await app.register(multipart, { throwFileSizeLimit: true });
  requireBatchAccess(app);
  const store = () => app.keyStore;

  app.post(
    "/files",
    {
      config: { upload: true, batchFile: true },
      schema: {
        operationId: "createFile",
        tags: ["batches"],
        summary: "Upload a Batch API input file (JSONL, purpose batch), up to the plan's maxBatchFileBytes, within the account's maxStoredFileBytes and maxStoredFiles",
        consumes: ["multipart/form-data"],
        multipartBody: FileUploadForm,
        response: { 200: Type.Ref(FileObject), ...errorResponses(400, 401, 403, 413, 429, 500, 503) },
      },
    },
    async (request) => fileObject(await receiveFile(request, store(), request.auth!, app.ctx.config)),
  );

  app.get<{ Querystring: FileListQuery }>(
    "/files",
    { schema: { operationId: "listFiles", tags: ["batches"], summary: "The account's files, newest first", querystring: FileListQuery, response: { 200: Type.Ref(FileList), ...fileErrors } } },
    async (request) => {
      const auth = request.auth!;
      const limit = Math.min(10000, Number(request.query.limit ?? 10000));
      const rows = await store().files.list(auth.accountId, { limit: limit + 1, after: request.query.after, order: request.query.order ?? "desc", purpose: request.query.purpose });
      const data = rows.slice(0, limit).map(fileObject);
      return { object: "list" as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/files/:id",
    { schema: { operationId: "retrieveFile", tags: ["batches"], summary: "A file of the account (404 for another account's)", params: IdParams, response: { 200: Type.Ref(FileObject), ...fileErrors } } },
    async (request) => fileObject(await foundOr404("file", request.params.id, store().files.get(request.auth!.accountId, request.params.id))),
  );

  app.get<{ Params: { id: string } }>(
    "/files/:id/content",
    {
      schema: {
        operationId: "downloadFile",
        tags: ["batches"],
        summary: "A file's bytes (JSONL), streamed",
        params: IdParams,
        response: { 200: { description: "The file's bytes", content: { "application/octet-stream": { schema: Type.String({ format: "binary" }) } } }, ...fileErrors },
      },
    },
    async (request, reply) => {
      const file = await foundOr404("file", request.params.id, store().files.get(request.auth!.accountId, request.params.id));
      return reply.type("application/octet-stream").header("content-length", file.bytes).send(Readable.from(store().files.chunks(file.id)));
    },
  );

  app.delete<{ Params: { id: string } }>(
    "/files/:id",
    { schema: { operationId: "deleteFile", tags: ["batches"], summary: "Delete a file of the account", params: IdParams, response: { 200: Type.Ref(FileDeleted), ...fileErrors } } },
    async (request) => {
      await foundOr404("file", request.params.id, store().files.delete(request.auth!.accountId, request.params.id));
      return { id: request.params.id, object: "file" as const, deleted: true };
    },
  );
}
