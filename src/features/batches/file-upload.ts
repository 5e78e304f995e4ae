import { setImmediate as nextTurn } from "node:timers/promises";
import type { Multipart, MultipartFile } from "@fastify/multipart";
import type { FastifyRequest } from "fastify";
import type { AuthContext } from "../../auth/auth-context.ts";
import type { AppConfig } from "../../config/app-config.ts";
import { AppError, isAppError } from "../../errors/app-error.ts";
import { fileChunkBytes, type FileRecord, type UploadRefusal } from "../../store/files.repo.ts";
import type { Store } from "../../store/store.ts";
import { newId } from "./batch-access.ts";
import { expiresAfterSeconds } from "./batches.schema.ts";

/** How long past the body timeout a reservation outlives its node (a dead node's upload is reclaimed after it). */
const reservationSlackMs = 5 * 60_000;

const bad = (param: string, message: string) => new AppError("invalid_parameter", { param, message });

/** A store call failed mid-upload: that is ours to answer (500, or 503 while the database is away), not the form's. */
class StoreFailure extends Error {
  constructor(readonly failure: unknown) {
    super("store failure");
  }
}

const viaStore = <T>(call: Promise<T>): Promise<T> =>
  call.catch((err: unknown) => {
    throw new StoreFailure(err);
  });

/** Maps @fastify/multipart and busboy errors to the §7 contract; never a 500 for a malformed upload. */
function uploadError(err: unknown, maxBatchFileBytes: number): AppError {
  if (isAppError(err)) return err;
  const code = (err as { code?: string }).code;
  if (code === "FST_REQ_FILE_TOO_LARGE") return new AppError("request_too_large", { message: `The file exceeds this plan's limit of ${maxBatchFileBytes} bytes (maxBatchFileBytes).` });
  return bad("file", `The multipart upload is malformed: ${(err as Error).message}.`);
}

function refusal({ refused, usage }: UploadRefusal, plan: AuthContext["plan"]): AppError {
  if (refused === "files") {
    return bad("file", `This account has ${usage.files} files, the most its plan keeps (maxStoredFiles ${plan.maxStoredFiles}); delete some before uploading.`);
  }
  return storageFull(usage.bytes, plan.maxStoredFileBytes);
}

const storageFull = (stored: number, max: number) =>
  new AppError("request_too_large", {
    message: `This account stores ${stored} bytes; the file does not fit in its plan's ${max} (maxStoredFileBytes, with the lines of its running batches). Delete files, or wait for batches to end.`,
  });

/** `expires_after[anchor]` and `expires_after[seconds]`, as the OpenAI clients send them in a form: ms, or undefined. */
function expiresAfterMs(fields: Map<string, string>): number | undefined {
  const anchor = fields.get("expires_after[anchor]");
  const seconds = fields.get("expires_after[seconds]");
  if (anchor === undefined && seconds === undefined) return undefined;
  if (anchor !== "created_at") throw bad("expires_after.anchor", "expires_after.anchor must be 'created_at'.");
  const { minimum, maximum } = expiresAfterSeconds;
  if (seconds === undefined || !/^[0-9]{1,8}$/.test(seconds) || Number(seconds) < minimum || Number(seconds) > maximum) {
    throw bad("expires_after.seconds", `expires_after.seconds must be a whole number of seconds from ${minimum} to ${maximum}.`);
  }
  return Number(seconds) * 1000;
}

/**
 * POST /v1/files: the form's file part goes to the store 1 MiB chunk by chunk as it arrives (never the whole body in
 * memory), under an `uploading` row that reserves its bytes of the account's storage: at most the plan's
 * maxBatchFileBytes, the request's Content-Length and what the account has left of maxStoredFileBytes. The file is
 * listed once its last chunk is in; a failed upload's chunks are deleted (or, its node dead, reclaimed by the sweep).
 */
export async function receiveFile(request: FastifyRequest, store: Store, auth: AuthContext, config: AppConfig): Promise<FileRecord> {
  if (!request.isMultipart()) throw bad("file", "The request must be multipart/form-data with the fields 'purpose' and 'file'.");
  const plan = auth.plan;
  const fields = new Map<string, string>();
  let upload: { file: FileRecord; reserved: number } | null = null;
  try {
    for await (const part of request.parts({ limits: { fileSize: plan.maxBatchFileBytes, files: 1, fields: 8, fieldSize: 1024, parts: 10 } }) as AsyncIterable<Multipart>) {
      if (part.type === "file") {
        if (part.fieldname !== "file") throw bad(part.fieldname, `Unexpected file field '${part.fieldname}'; send the file in the field 'file'.`);
        checkPurpose(fields.get("purpose"), false);
        upload = await begin(request, store, auth, config, part.filename || "upload.jsonl");
        upload.file.bytes = await writeChunks(store, upload.file.id, part, upload.reserved, plan);
      } else {
        fields.set(part.fieldname, String(part.value));
      }
    }
    if (!upload) throw bad("file", "The field 'file' is required: upload the JSONL as a file part named 'file'.");
    const purpose = checkPurpose(fields.get("purpose"), true)!;
    const after = expiresAfterMs(fields);
    const expiresAt = after !== undefined ? upload.file.createdAt + after : config.batches.fileExpiryMs === null ? null : upload.file.createdAt + config.batches.fileExpiryMs;
    const file: FileRecord = { ...upload.file, purpose, expiresAt };
    if (!(await viaStore(store.files.finishUpload(file.id, file)))) throw new StoreFailure(new Error(`the upload row of ${file.id} was reclaimed before its upload ended`));
    return file;
  } catch (err) {
    if (upload) await store.files.reclaim(upload.file.id).catch(() => {});
    if (err instanceof StoreFailure) throw err.failure;
    throw uploadError(err, plan.maxBatchFileBytes);
  }
}

/** Purpose `batch` only; `required` once the form has been read to its end (before the file, a wrong one is refused early). */
function checkPurpose(purpose: string | undefined, required: boolean): string | undefined {
  if (purpose === undefined) {
    if (required) throw bad("purpose", "The field 'purpose' is required; it must be 'batch'.");
    return undefined;
  }
  if (purpose !== "batch") throw bad("purpose", `The purpose must be 'batch', not '${purpose}'.`);
  return purpose;
}

async function begin(request: FastifyRequest, store: Store, auth: AuthContext, config: AppConfig, filename: string): Promise<{ file: FileRecord; reserved: number }> {
  const now = Date.now();
  const declared = Number(request.headers["content-length"]);
  const wanted = Math.min(auth.plan.maxBatchFileBytes, Number.isFinite(declared) ? declared : Infinity);
  const file: FileRecord = {
    id: newId("file-"),
    accountId: auth.accountId,
    keyId: auth.keyId,
    purpose: "batch",
    filename,
    bytes: 0,
    createdAt: now,
    expiresAt: now + config.server.bodyTimeoutMs + reservationSlackMs,
  };
  const limits = { maxStoredBytes: auth.plan.maxStoredFileBytes, maxStoredFiles: auth.plan.maxStoredFiles };
  const begun = await viaStore(store.files.beginUpload(file, wanted, limits, now));
  if ("refused" in begun) throw refusal(begun, auth.plan);
  return { file, reserved: begun.reserved };
}

/**
 * The file part's bytes into the store in chunks of `fileChunkBytes`; its size. Past `reserved`, 413. A turn of the
 * event loop after each chunk: on SQLite a write is synchronous (a MiB, and now and then the WAL checkpoint it
 * triggers), and the part's buffered pieces and the awaited writes resolve without a turn between them, so one turn
 * held several MiB of writes (52 ms on a machine with costly system calls).
 */
async function writeChunks(store: Store, fileId: string, part: MultipartFile, reserved: number, plan: AuthContext["plan"]): Promise<number> {
  let seq = 0;
  let total = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const piece of part.file as AsyncIterable<Buffer>) {
    total += piece.length;
    if (total > reserved) {
      if (reserved >= plan.maxBatchFileBytes) throw uploadError({ code: "FST_REQ_FILE_TOO_LARGE" }, plan.maxBatchFileBytes);
      throw storageFull(plan.maxStoredFileBytes - reserved, plan.maxStoredFileBytes);
    }
    pending.push(piece);
    pendingBytes += piece.length;
    if (pendingBytes < fileChunkBytes) continue;
    const joined = Buffer.concat(pending, pendingBytes);
    let at = 0;
    for (; joined.length - at >= fileChunkBytes; at += fileChunkBytes) {
      await viaStore(store.files.writeChunk(fileId, seq++, joined.subarray(at, at + fileChunkBytes)));
      await nextTurn();
    }
    pending = at < joined.length ? [joined.subarray(at)] : [];
    pendingBytes = joined.length - at;
  }
  if (part.file.truncated) throw uploadError({ code: "FST_REQ_FILE_TOO_LARGE" }, plan.maxBatchFileBytes);
  if (pendingBytes > 0) await viaStore(store.files.writeChunk(fileId, seq, Buffer.concat(pending, pendingBytes)));
  return total;
}
