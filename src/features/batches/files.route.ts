import { Readable } from "node:stream";
import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import multipart, { type Multipart } from "@fastify/multipart";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError, isAppError } from "../../errors/app-error.ts";
import type { FileRecord } from "../../store/files.repo.ts";
import { assertBatchAccess, newId, notFound, seconds } from "./batch-access.ts";
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
    expires_at: null,
    status_details: null,
  };
}

const bad = (param: string, message: string) => new AppError("invalid_parameter", { param, message });

/** Reads purpose and file from the form; the file is bounded by the plan's maxBatchFileBytes (413). */
async function readUpload(request: FastifyRequest, limit: number): Promise<{ purpose: string | null; filename: string; content: Buffer }> {
  if (!request.isMultipart()) throw bad("file", "The request must be multipart/form-data with the fields 'purpose' and 'file'.");
  let purpose: string | null = null;
  let file: { filename: string; content: Buffer } | null = null;
  try {
    for await (const part of request.parts({ limits: { fileSize: limit, files: 1, fields: 8, fieldSize: 1024, parts: 10 } }) as AsyncIterable<Multipart>) {
      if (part.type === "file") {
        if (part.fieldname !== "file") throw bad(part.fieldname, `Unexpected file field '${part.fieldname}'; send the file in the field 'file'.`);
        const chunks: Buffer[] = [];
        for await (const chunk of part.file as AsyncIterable<Buffer>) chunks.push(chunk);
        if (part.file.truncated) throw new AppError("request_too_large", { message: `The file exceeds this plan's limit of ${limit} bytes (maxBatchFileBytes).` });
        file = { filename: part.filename || "upload.jsonl", content: Buffer.concat(chunks) };
      } else if (part.fieldname === "purpose") {
        purpose = String(part.value);
      }
    }
  } catch (err) {
    if (isAppError(err)) throw err;
    const code = (err as { code?: string }).code;
    if (code === "FST_REQ_FILE_TOO_LARGE") throw new AppError("request_too_large", { message: `The file exceeds this plan's limit of ${limit} bytes (maxBatchFileBytes).` });
    throw bad("file", `The multipart upload is malformed: ${(err as Error).message}.`);
  }
  if (purpose === null) throw bad("purpose", "The field 'purpose' is required; it must be 'batch'.");
  if (!file) throw bad("file", "The field 'file' is required: upload the JSONL as a file part named 'file'.");
  return { purpose, ...file };
}

/** POST/GET /v1/files, GET/DELETE /v1/files/{id}, GET /v1/files/{id}/content: an account's Batch API files. */
export default async function filesRoutes(app: FastifyInstance): Promise<void> {
  await app.register(multipart, { throwFileSizeLimit: true });
  const store = () => app.keyStore;
  const deployment = app.ctx.config.deployment;

  app.post(
    "/files",
    {
      config: { upload: true, batchFile: true },
      schema: {
        operationId: "createFile",
        tags: ["batches"],
        summary: "Upload a Batch API input file (JSONL, purpose batch), up to the plan's maxBatchFileBytes",
        consumes: ["multipart/form-data"],
        multipartBody: FileUploadForm,
        response: { 200: Type.Ref(FileObject), ...errorResponses(400, 401, 403, 413, 429, 500, 503) },
      },
    },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const upload = await readUpload(request, auth.plan.maxBatchFileBytes);
      if (upload.purpose !== "batch") throw bad("purpose", `The purpose must be 'batch', not '${upload.purpose}'.`);
      const file: FileRecord = { id: newId("file-"), accountId: auth.accountId, keyId: auth.keyId, purpose: "batch", filename: upload.filename, bytes: upload.content.length, createdAt: Date.now() };
      await store().files.insert(file, upload.content);
      return fileObject(file);
    },
  );

  app.get<{ Querystring: FileListQuery }>(
    "/files",
    { schema: { operationId: "listFiles", tags: ["batches"], summary: "The account's files, newest first", querystring: FileListQuery, response: { 200: Type.Ref(FileList), ...fileErrors } } },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const limit = Math.min(10000, Number(request.query.limit ?? 10000));
      const rows = await store().files.list(auth.accountId, { limit: limit + 1, after: request.query.after, order: request.query.order ?? "desc", purpose: request.query.purpose });
      const data = rows.slice(0, limit).map(fileObject);
      return { object: "list" as const, data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: rows.length > limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    "/files/:id",
    { schema: { operationId: "retrieveFile", tags: ["batches"], summary: "A file of the account (404 for another account's)", params: IdParams, response: { 200: Type.Ref(FileObject), ...fileErrors } } },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const file = await store().files.get(auth.accountId, request.params.id);
      if (!file) throw notFound("file", request.params.id, "file_id");
      return fileObject(file);
    },
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
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      const file = await store().files.get(auth.accountId, request.params.id);
      if (!file) throw notFound("file", request.params.id, "file_id");
      return reply.type("application/octet-stream").header("content-length", file.bytes).send(Readable.from(store().files.chunks(file.id)));
    },
  );

  app.delete<{ Params: { id: string } }>(
    "/files/:id",
    { schema: { operationId: "deleteFile", tags: ["batches"], summary: "Delete a file of the account", params: IdParams, response: { 200: Type.Ref(FileDeleted), ...fileErrors } } },
    async (request) => {
      const auth = request.auth!;
      assertBatchAccess(auth, deployment);
      if (!(await store().files.delete(auth.accountId, request.params.id))) throw notFound("file", request.params.id, "file_id");
      return { id: request.params.id, object: "file" as const, deleted: true };
    },
  );
}
