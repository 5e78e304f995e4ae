import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { requireModel } from "../model-access.ts";
import type { ChatDelta, ChatRequest, Engine, FinishReason, PreparedChat, TokenLogprob } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import { DeadlineExceeded } from "../../http/request-signal.ts";
import type { SseStream } from "../../http/sse.ts";
import type { ModelRunner } from "../../scheduler/model-runner.ts";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, WireToolCall } from "./chat.schema.ts";
import { toChatRequest } from "./chat.shape.ts";
import { StreamBatcher } from "./stream-batcher.ts";

export type SignalFor = (deadlineMs: number) => AbortSignal;

interface ReadyChat {
  runner: ModelRunner;
  engine: Engine;
  req: ChatRequest;
  prepared: PreparedChat;
}

/**
 * Every check before capacity, in the decisions.md order: parameters (400), model (404), scope (403),
 * capabilities (400), servable (404/503), context (400 context_length_exceeded).
 */
async function prepare(ctx: AppContext, auth: AuthContext, body: ChatCompletionRequest): Promise<ReadyChat> {
  const { req, images } = toChatRequest(body, auth.plan);
  const runner = requireModel(ctx, auth, "chat", body.model, "chat", "chat completions");
  const caps = runner.entry.capabilities;
  const unsupported = (param: string, what: string) =>
    new AppError("invalid_parameter", { param, message: `The model '${body.model}' does not support ${what}.` });
  if (images.length > 0 && !caps.includes("vision")) throw unsupported(images[0].param, "image inputs (it is a text-only model)");
  if (req.tools.length > 0 && !caps.includes("tools")) throw unsupported("tools", "tools");
  if (req.responseFormat === "json_object" && !caps.includes("json")) throw unsupported("response_format", "JSON mode");
  if (req.topLogprobs !== null && !caps.includes("logprobs")) throw unsupported("logprobs", "logprobs");
  const engine = runner.assertServable();
  if (!engine.prepareChat || !engine.chat) throw new AppError("internal_error", { message: `The model '${body.model}' has no chat engine.` });
  const prepared = await engine.prepareChat(req);
  const cap = auth.plan.maxOutputTokens;
  if (cap !== null && prepared.maxTokens > cap) prepared.maxTokens = cap;
  return { runner, engine, req, prepared };
}

/** Collects engine deltas into the non-stream message (§2.3). */
class Accumulator {
  content = "";
  reasoning = "";
  logprobs: TokenLogprob[] = [];
  toolCalls: WireToolCall[] = [];
  finishReason: FinishReason | null = null;
  promptTokens = 0;
  completionTokens = 0;
  /** Deltas seen, the completion-token estimate when generation is cut before the engine reports usage. */
  pieces = 0;

  add(delta: ChatDelta): void {
    switch (delta.type) {
      case "content":
        this.content += delta.text;
        if (delta.logprobs) this.logprobs.push(...delta.logprobs);
        this.pieces += delta.logprobs?.length || 1;
        break;
      case "reasoning":
        this.reasoning += delta.text;
        this.pieces++;
        break;
      case "tool_call": {
        const call = (this.toolCalls[delta.index] ??= { id: delta.id ?? "", type: "function", function: { name: "", arguments: "" } });
        if (delta.id) call.id = delta.id;
        if (delta.name) call.function.name = delta.name;
        call.function.arguments += delta.arguments;
        break;
      }
      case "done":
        this.finishReason = delta.finishReason;
        this.promptTokens = delta.usage.promptTokens;
        this.completionTokens = delta.usage.completionTokens;
        break;
    }
  }
}

function usageOf(prompt: number, completion: number) {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function record(ctx: AppContext, auth: AuthContext, model: string, prompt: number, completion: number): void {
  ctx.usage.record({ keyId: auth.keyId, accountId: auth.accountId, model, endpoint: "chat", promptTokens: prompt, completionTokens: completion });
}

/** A deadline while queued means the model had no capacity in time. */
function queuedTooLong(runner: ModelRunner): AppError {
  return new AppError("overloaded", {
    message: `The model '${runner.entry.id}' had no free capacity within the request deadline.`,
    retryAfterMs: 1000,
  });
}

/** §4.2 non-streaming: runs the generation to its end and returns the chat completion object. */
export async function completeChat(ctx: AppContext, auth: AuthContext, body: ChatCompletionRequest, signalFor: SignalFor): Promise<ChatCompletion> {
  const { runner, req, prepared } = await prepare(ctx, auth, body);
  const signal = signalFor(runner.entry.requestTimeoutMs);
  const acc = new Accumulator();
  let lease;
  try {
    lease = await runner.acquire(auth.keyId, signal);
  } catch (err) {
    if (err instanceof DeadlineExceeded) throw queuedTooLong(runner);
    throw err;
  }
  const created = Math.floor(Date.now() / 1000);
  try {
    for await (const delta of lease.engine.chat!(req, prepared, signal)) acc.add(delta);
  } catch (err) {
    // A deadline that cuts generation returns what was produced, as if max_tokens had been reached.
    if (!(err instanceof DeadlineExceeded)) throw err;
    acc.finishReason = "length";
    acc.promptTokens = prepared.promptTokens;
    acc.completionTokens = acc.pieces;
  } finally {
    lease.release();
  }
  record(ctx, auth, body.model, acc.promptTokens, acc.completionTokens);
  const hasCalls = acc.toolCalls.length > 0;
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created,
    model: body.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: hasCalls && acc.content.length === 0 ? null : acc.content,
          ...(acc.reasoning.length > 0 ? { reasoning_content: acc.reasoning } : {}),
          ...(hasCalls ? { tool_calls: acc.toolCalls } : {}),
        },
        logprobs: req.topLogprobs !== null ? { content: acc.logprobs } : null,
        finish_reason: acc.finishReason ?? "stop",
      },
    ],
    usage: usageOf(acc.promptTokens, acc.completionTokens),
  };
}

/**
 * §4.2 + §6 streaming. Nothing is written until the first delta, so any error before the first token is a normal
 * JSON error (thrown to the error handler); after it, errors become the decisions.md error frame.
 */
export async function streamChat(
  ctx: AppContext,
  auth: AuthContext,
  body: ChatCompletionRequest,
  sse: SseStream,
  signalFor: SignalFor,
): Promise<void> {
  const { runner, req, prepared } = await prepare(ctx, auth, body);
  const signal = signalFor(runner.entry.requestTimeoutMs);
  const includeUsage = body.stream_options?.include_usage === true;
  const withLogprobs = req.topLogprobs !== null;
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: Record<string, unknown>, finishReason: string | null, logprobs?: TokenLogprob[]): ChatCompletionChunk => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: body.model,
    choices: [{ index: 0, delta, logprobs: withLogprobs && logprobs ? { content: logprobs } : null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  });

  sse.keepAliveUntilFirstFrame();
  let lease;
  try {
    lease = await runner.acquire(auth.keyId, signal);
  } catch (err) {
    if (sse.committed) return sse.fail(toAppError(err instanceof DeadlineExceeded ? queuedTooLong(runner) : err).appError);
    sse.dispose();
    throw err instanceof DeadlineExceeded ? queuedTooLong(runner) : err;
  }

  const acc = new Accumulator();
  let started = false;
  let finished = false;
  const batcher = new StreamBatcher((kind, text, logprobs) =>
    sse.send(chunk(kind === "content" ? { content: text } : { reasoning_content: text }, null, logprobs)),
  );
  const finish = (reason: string) => {
    batcher.flush();
    sse.send(chunk({}, reason));
    if (includeUsage) sse.send({ id, object: "chat.completion.chunk", created, model: body.model, choices: [], usage: usageOf(acc.promptTokens, acc.completionTokens) });
    sse.done();
    finished = true;
  };
  try {
    for await (const delta of lease.engine.chat!(req, prepared, signal)) {
      acc.add(delta);
      if (delta.type === "done") break;
      if (!started) {
        started = true;
        sse.send(chunk({ role: "assistant", content: "" }, null));
      }
      if (delta.type === "content") {
        batcher.add("content", delta.text, delta.logprobs);
      } else if (delta.type === "reasoning") {
        batcher.add("reasoning", delta.text);
      } else if (batcher.flush(), delta.id !== undefined) {
        sse.send(chunk({ tool_calls: [{ index: delta.index, id: delta.id, type: "function", function: { name: delta.name ?? "", arguments: delta.arguments } }] }, null));
      } else {
        sse.send(chunk({ tool_calls: [{ index: delta.index, function: { arguments: delta.arguments } }] }, null));
      }
    }
    if (!started) sse.send(chunk({ role: "assistant", content: "" }, null));
    finish(acc.finishReason ?? "stop");
  } catch (err) {
    if (err instanceof DeadlineExceeded && started) {
      acc.promptTokens = prepared.promptTokens;
      acc.completionTokens = acc.pieces;
      finish("length");
    } else if (sse.committed || started) {
      batcher.flush();
      sse.fail(toAppError(err).appError);
    } else {
      sse.dispose();
      throw err instanceof DeadlineExceeded ? queuedTooLong(runner) : err;
    }
  } finally {
    lease.release();
    if (finished || started) record(ctx, auth, body.model, acc.promptTokens || prepared.promptTokens, acc.completionTokens || acc.pieces);
  }
}
