import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { grantsEndpoint } from "../../auth/key-grants.ts";
import { AppError } from "../../errors/app-error.ts";
import type { BatchError, BatchRecord } from "../../store/batches.repo.ts";
import type { FileRecord } from "../../store/files.repo.ts";
import type { Store } from "../../store/store.ts";
import { endpointOfBatch, foundOr404, newId } from "./batch-access.ts";
import { checkBatchInput, type InputRules } from "./batch-input.ts";
import type { CreateBatchRequest } from "./batches.schema.ts";

/** The completion window ("24h", the only one the API takes). */
const completionWindowMs = 24 * 3_600_000;

export interface BatchDeps {
  ctx: AppContext;
  store: Store;
  /** Tells this node's runner there is a batch to work. */
  wake: () => void;
}

/**
 * Creates a batch from an uploaded file. The file is read chunk by chunk from the store and checked line by line
 * (batch-input.ts), its good lines stored a page at a time under a `validating` batch whose lines hold the file's
 * size of the account's storage; then the batch is `in_progress`, or `failed` with the errors, which the file keeps:
 * a batch made again from the same file and endpoint fails at once, without reading it again.
 */
export async function createBatch(deps: BatchDeps, auth: AuthContext, body: CreateBatchRequest, validate: InputRules["validate"]): Promise<BatchRecord> {
  const { ctx, store } = deps;
  const { input_file_id, endpoint } = body;
  if (!grantsEndpoint(auth, endpointOfBatch[endpoint], ctx.config.deployment)) {
    throw new AppError("model_not_in_plan", { param: "endpoint", message: `This key's plan does not include the ${endpointOfBatch[endpoint]} endpoint.` });
  }
  const file = await foundOr404("file", input_file_id, store.files.get(auth.accountId, input_file_id), "input_file_id");
  if (file.purpose !== "batch") throw new AppError("invalid_parameter", { param: "input_file_id", message: `The file '${input_file_id}' has purpose '${file.purpose}', not 'batch'.` });
  const now = Date.now();
  const batch = newBatch(ctx, auth, body, now);
  const kept = (await store.files.keptErrors(file.id, endpoint)) as BatchError[] | null;
  if (kept) {
    await store.batches.insert({ ...batch, status: "failed", errors: kept, failedAt: now }, []);
    return (await store.batches.get(auth.accountId, batch.id))!;
  }
  const refused = await store.batchIntake.begin(batch, file.bytes, auth.plan.maxStoredFileBytes, now);
  if (refused) {
    const message = `This account stores ${refused.refused.bytes} bytes of its plan's ${auth.plan.maxStoredFileBytes} (maxStoredFileBytes); a batch's lines take its input file's ${file.bytes} bytes while it runs. Delete files, or wait for batches to end.`;
    throw new AppError("request_too_large", { message });
  }
  try {
    await checkInto(deps, auth, batch, file, validate);
  } catch (err) {
    // The store failed mid-way: the batch must not stay half-made (the sweep catches it if this fails too).
    const error: BatchError = { code: "server_error", message: "The batch could not be validated (the store failed); create it again.", param: null, line: null };
    await store.batchIntake.refuse(batch.id, [error], Date.now()).then(() => store.batchIntake.reclaimLines(batch.id)).catch(() => {});
    throw err;
  }
  return (await store.batches.get(auth.accountId, batch.id))!;
}

/**
 * Two reads of the file: the first only checks it (a bad file costs no writes, and keeps its errors); the second
 * checks it again (it fills the schemas' defaults in) and stores the lines page by page.
 */
async function checkInto({ ctx, store, wake }: BatchDeps, auth: AuthContext, batch: BatchRecord, file: FileRecord, validate: InputRules["validate"]): Promise<void> {
  const rules: InputRules = { endpoint: batch.endpoint, validate, maxLineBytes: auth.plan.maxBodyBytes };
  let read = 0;
  async function* counted() {
    read = 0;
    for await (const chunk of store.files.chunks(file.id)) {
      read += chunk.length;
      yield chunk;
    }
  }
  const first = await checkBatchInput(counted(), rules);
  if (first.errors.length > 0) {
    await store.batchIntake.refuse(batch.id, first.errors, Date.now());
    await store.files.keepErrors(file.id, batch.endpoint, first.errors);
    return;
  }
  const check = await checkBatchInput(counted(), rules, (lines) => store.batchIntake.addLines(batch.id, lines));
  // Cancelled while it was being read: the runner ends it with the lines it has.
  if (check.stopped) return;
  // Read to its end without an error, yet short, or not what the first read found: the file was deleted (or it
  // expired) and was reclaimed meanwhile.
  if (read !== file.bytes || check.errors.length > 0 || check.lines !== first.lines) {
    const gone: BatchError = { code: "file_deleted", message: "The input file was deleted or expired while the batch was being validated.", param: "input_file_id", line: null };
    await store.batchIntake.refuse(batch.id, [gone], Date.now());
    await store.batchIntake.reclaimLines(batch.id);
    return;
  }
  const concurrency = Math.max(1, ...[...check.models].map((m) => ctx.catalog.named(m)?.entry.parallel ?? 1));
  if (await store.batchIntake.accept(batch.id, concurrency, Date.now())) wake();
}

function newBatch(ctx: AppContext, auth: AuthContext, body: CreateBatchRequest, now: number): BatchRecord {
  return {
    id: newId("batch_"),
    accountId: auth.accountId,
    keyId: auth.keyId,
    endpoint: body.endpoint,
    inputFileId: body.input_file_id,
    completionWindow: body.completion_window,
    status: "validating",
    metadata: body.metadata ?? null,
    errors: null,
    outputFileId: null,
    errorFileId: null,
    total: 0,
    completed: 0,
    failed: 0,
    concurrency: 1,
    createdAt: now,
    inProgressAt: null,
    expiresAt: now + completionWindowMs,
    finalizingAt: null,
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancellingAt: null,
    cancelledAt: null,
    outputExpiresAfterMs: body.output_expires_after ? body.output_expires_after.seconds * 1000 : ctx.config.batches.outputExpiryMs,
  };
}
