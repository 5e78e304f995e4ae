import type { FastifyBaseLogger } from "fastify";
import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { resolveKey } from "../../auth/effective-limits.ts";
import { AppError } from "../../errors/app-error.ts";
import { DeadlineExceeded } from "../../errors/aborts.ts";
import { toEnvelope } from "../../errors/envelope.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import { freshOutcome } from "../../http/request-outcome.ts";
import type { BatchLine, BatchRecord } from "../../store/batches.repo.ts";
import type { Store } from "../../store/store.ts";
import type { UsageEvent } from "../../store/usage-sink.ts";
import { isStoreBusy, isStoreUnreachable } from "../../store/store-health.ts";
import { completeChat } from "../chat/chat.service.ts";
import type { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { createEmbeddings } from "../embeddings/embeddings.service.ts";
import type { EmbeddingsRequest } from "../embeddings/embeddings.schema.ts";
import type { RequestContext } from "../request-context.ts";
import { endpointOfBatch, newId } from "./batch-access.ts";
import type { BatchEndpoint } from "./batches.schema.ts";

/** How often a line's key is read from the store again (a revoked key stops the batch's lines within this). */
const authTtlMs = 1_000;
/** Error codes a batch line waits out and retries (capacity, loading), instead of writing them as its result. */
const retryable = new Set(["overloaded", "model_loading", "rate_limit_exceeded"]);
/**
 * A refusal that frees later than this (the account's budget or token quota: the end of a UTC day or month) is the
 * line's result instead of a wait: waiting would hold one of the node's batches for hours.
 */
const longestWaitMs = 60_000;
/** How long a line waits after the database did not answer one of its reads. */
const storeRetryMs = 1000;

/**
 * Why a batch's lines were stopped: a cancel, the window's end, the lease lost, the node stopping (each aborts the
 * lines running), or the batch handed back to share the node (no line starts; those running finish).
 */
export type StopReason = "cancel" | "expire" | "lost" | "shutdown" | "yield";

/** A line's end, to write with the mark of its completion. */
export interface LineResult {
  state: "done" | "error";
  /** The line's JSON in the output or error file. */
  result: string;
  /** Whether it counts in request_counts (completed or failed): it ran, in whole or in part. */
  counted: boolean;
  /** The tokens it was charged (prompt and completion), for the account's share of the node's batches. */
  tokens: number;
  /** Its usage, written with its result in one transaction (batches.repo.ts `complete`), not through the recorder. */
  usage: UsageEvent[];
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

/** The error file's line for a line a cancel or the window's end left unrun, or stopped while it ran. */
export function endedLine(customId: string, end: "cancelled" | "expired", ran: boolean): string {
  const error =
    end === "expired"
      ? { code: "batch_expired", message: ran ? "This request was stopped when the completion window expired." : "This request could not be executed before the completion window expired." }
      : { code: "batch_cancelled", message: ran ? "This request was stopped when the batch was cancelled." : "This request was not executed because the batch was cancelled." };
  return JSON.stringify({ id: newId("batch_req_"), custom_id: customId, response: null, error });
}

/**
 * Runs a batch's lines as `batch` priority requests of the batch's key, through the same services as the HTTP
 * endpoints (no rate limit: that is an HTTP hook), under the key's effective limits as the store holds them now.
 */
export class LineRunner {
  private readonly auths = new Map<string, { at: number; auth: AuthContext | AppError }>();

  constructor(
    private readonly ctx: AppContext,
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
  ) {}

  /**
   * Runs one line to its result; null when it stays pending: the batch was stopped (`stopped()` says why) before
   * it ran, or it runs again (a node stopping, the lease lost). A line a cancel or the window's end stopped while it
   * ran is a failed line: it was charged what it used.
   */
  async run(batch: BatchRecord, line: BatchLine, signal: AbortSignal, stopped: () => StopReason | null): Promise<LineResult | null> {
    const endpoint = endpointOfBatch[batch.endpoint as BatchEndpoint];
    const requestId = newId("req_");
    const log = this.log.child({ batch: batch.id, line: line.line, reqId: requestId });
    for (;;) {
      const started = Date.now();
      const timers: NodeJS.Timeout[] = [];
      // Filled by the service with the tokens charged, once the line ran (features/inference.ts).
      const outcome = freshOutcome(0);
      const usage: UsageEvent[] = [];
      const tokens = () => (outcome.promptTokens ?? 0) + (outcome.completionTokens ?? 0);
      let status: number;
      let body: unknown;
      try {
        const auth = await this.authOf(batch);
        if (auth instanceof AppError) throw auth;
        if (stopped()) return null;
        const request: RequestContext = {
          auth,
          endpoint,
          log,
          signalFor: (deadlineMs) => {
            const deadline = new AbortController();
            const timer = setTimeout(() => deadline.abort(new DeadlineExceeded(deadlineMs)), deadlineMs);
            timer.unref();
            timers.push(timer);
            return AbortSignal.any([signal, deadline.signal]);
          },
          elapsedMs: () => Date.now() - started,
          outcome,
          headers: {},
          priority: "batch",
          usage: { record: (event) => usage.push(event) },
        };
        const parsed = JSON.parse(line.body) as unknown;
        body = endpoint === "chat" ? await completeChat(this.ctx, request, parsed as ChatCompletionRequest) : await createEmbeddings(this.ctx, request, parsed as EmbeddingsRequest);
        status = 200;
      } catch (err) {
        const reason = signal.aborted ? stopped() : null;
        if (reason) {
          const ran = outcome.promptTokens !== null;
          if (!ran || (reason !== "cancel" && reason !== "expire")) return null;
          return { state: "error", result: endedLine(line.customId, reason === "cancel" ? "cancelled" : "expired", true), counted: true, tokens: tokens(), usage };
        }
        // The database did not answer (a stall, a full pool, an outage): that is no answer to the line. Its reads
        // all come before the model runs (the key, the budget), so running the line again never runs it twice.
        const storeDown = isStoreBusy(err) || isStoreUnreachable(err);
        const { appError, unexpected } = toAppError(err);
        if (storeDown || (retryable.has(appError.code) && (appError.retryAfterMs ?? 0) <= longestWaitMs)) {
          if (storeDown) log.warn({ err }, "batch runner: the database did not answer a line's read; the line runs again");
          // Capacity or the store: wait and try the line again (the batch has until its completion window ends).
          await sleep(storeDown ? storeRetryMs : (appError.retryAfterMs ?? 1000), signal);
          if (stopped()) return null;
          continue;
        }
        if (unexpected) log.error({ err }, "batch line failed");
        status = appError.status;
        body = toEnvelope(appError);
      } finally {
        for (const timer of timers) clearTimeout(timer);
      }
      const result = JSON.stringify({ id: newId("batch_req_"), custom_id: line.customId, response: { status_code: status, request_id: requestId, body }, error: null });
      return { state: status === 200 ? "done" : "error", result, counted: true, tokens: tokens(), usage };
    }
  }

  /**
   * The batch key's effective limits as the store holds them now (revocation, scopes, the account's own budget
   * apply: auth/effective-limits.ts, as for /v1), cached a second. A key revoked, or bound to another deployment
   * than this node's, fails the line with 401 as /v1 would.
   */
  private async authOf(batch: BatchRecord): Promise<AuthContext | AppError> {
    const cached = this.auths.get(batch.keyId);
    if (cached && Date.now() - cached.at < authTtlMs) return cached.auth;
    const key = await this.store.keys.get(batch.keyId);
    const account = key ? await this.store.accounts.find(key.accountId) : null;
    let auth: AuthContext | AppError;
    if (!key || !account) {
      auth = new AppError("invalid_api_key", { message: "The API key that created this batch is revoked or no longer valid." });
    } else {
      try {
        const resolved = resolveKey(this.ctx.config, { key, account });
        if (resolved.revoked) auth = new AppError("invalid_api_key", { message: "The API key that created this batch is revoked or no longer valid." });
        else if (!resolved.servesHere) auth = new AppError("invalid_api_key", { message: "The API key that created this batch is not valid on this node's deployment." });
        // Its lines run inside the server: the allowlist was checked when the batch was created from its address.
        else auth = resolved.auth;
      } catch (err) {
        this.log.error({ account: account.id, plan: account.plan }, "account's plan is not in the config");
        auth = toAppError(err).appError;
      }
    }
    if (this.auths.size > 1000) this.auths.clear();
    this.auths.set(batch.keyId, { at: Date.now(), auth });
    return auth;
  }
}
