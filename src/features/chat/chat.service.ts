import { randomUUID } from "node:crypto";
import type { AppContext } from "../../app-context.ts";
import type { Plan } from "../../config/app-config.ts";
import type { ChatDelta, ChatRequest, Engine, FinishReason, PreparedChat, TokenLogprob } from "../../engines/engine.ts";
import type { AppError } from "../../errors/app-error.ts";
import { DeadlineExceeded, isClientDisconnect } from "../../errors/aborts.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { SseStream } from "../../http/sse.ts";
import { runInference } from "../inference.ts";
import type { RequestContext } from "../request-context.ts";
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, WireToolCall } from "./chat.schema.ts";
import { toChatRequest } from "./chat.shape.ts";
import { StreamBatcher, type OutputDelta } from "./stream-batcher.ts";
import { GenerationTimer } from "./generation-timer.ts";

/** The engine templates and tokenizes (context_length_exceeded here); the plan's output cap bounds an omitted max_tokens. */
async function prepareChat(engine: Engine, req: ChatRequest, plan: Plan, signal: AbortSignal): Promise<PreparedChat> {
  const prepared = await engine.prepareChat!(req, signal);
  const cap = plan.maxOutputTokens;
  if (cap !== null && prepared.maxTokens > cap) prepared.maxTokens = cap;
  return prepared;
}

/** Collects engine deltas into the non-stream message (§2.3). */
export class Accumulator {
  content = "";
  reasoning = "";
  logprobs: TokenLogprob[] = [];
  toolCalls: WireToolCall[] = [];
  finishReason: FinishReason | null = null;
  promptTokens = 0;
  completionTokens = 0;
  /** Deltas seen, the completion-token estimate when generation is cut before the engine reports usage. */
  pieces = 0;
  /** Reasoning deltas seen: one per token on the in-process engines, the reasoning share of the completion tokens. */
  reasoningPieces = 0;

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
        this.reasoningPieces++;
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

/** A generation run to its end: the collected output, and when it started (the wire's `created`). */
export interface CollectedChat {
  output: Accumulator;
  created: number;
}

/** Runs a chat request to its end through the scheduler and collects its output (non-streaming wire formats). */
export async function collectChat(ctx: AppContext, request: RequestContext, model: string, chatReq: ChatRequest): Promise<CollectedChat> {
  const req = { ...chatReq, buffered: true };
  let created = 0;
  const output = await runInference(ctx, request, {
    model,
    chat: req,
    input: { kind: "chat", req },
    prepare: (engine, signal) => prepareChat(engine, req, request.auth.plan, signal),
    run: async (engine, prepared, signal) => {
      created = Math.floor(Date.now() / 1000);
      const acc = new Accumulator();
      const timer = new GenerationTimer(ctx.metrics, model, request);
      try {
        for await (const delta of engine.chat!(req, prepared, signal)) {
          if (delta.type !== "done") timer.piece();
          acc.add(delta);
        }
        timer.finish(acc.completionTokens);
      } catch (err) {
        // A deadline that cuts generation returns what was produced, as if max_tokens had been reached.
        if (!(err instanceof DeadlineExceeded)) throw err;
        acc.finishReason = "length";
        acc.promptTokens = prepared.promptTokens;
        acc.completionTokens = acc.pieces;
      }
      return acc;
    },
    usage: (acc) => ({ promptTokens: acc.promptTokens, completionTokens: acc.completionTokens }),
  });
  return { output, created };
}

/** §4.2 non-streaming: runs the generation to its end and returns the chat completion object. */
export async function completeChat(ctx: AppContext, request: RequestContext, body: ChatCompletionRequest): Promise<ChatCompletion> {
  const req = toChatRequest(body, request.auth.plan);
  const { output: acc, created } = await collectChat(ctx, request, body.model, req);
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

/** How a wire format writes a streamed generation; the runner below decides when each call happens. */
export interface ChatStreamWriter {
  /** Before the first delta (or at the end, when the generation produced none). */
  start(): void;
  /** Coalesced output (stream-batcher.ts). */
  delta(delta: OutputDelta): void;
  /** The generation ended: the closing events, then the stream ends. `output` holds the whole output and its usage. */
  finish(reason: FinishReason, output: Accumulator): void;
  /** An error after the stream began: the format's error event, then the stream ends. */
  fail(error: AppError): void;
}

/**
 * Streams a chat request through the scheduler into a wire format's writer (§6). Nothing is written until the
 * first delta (or a keep-alive while queued), so any error before it is a normal JSON error (thrown to the error
 * handler); after it, errors go to `writer.fail`, and an unexpected one is logged here, once, with the request id.
 */
export async function streamChatTo(ctx: AppContext, request: RequestContext, model: string, req: ChatRequest, sse: SseStream, writer: ChatStreamWriter): Promise<void> {
  const failStream = (err: unknown) => {
    const { appError, unexpected, disconnected } = toAppError(err);
    // A client that left has no error code: nobody was answered one.
    if (request.outcome && !disconnected) request.outcome.errorCode = appError.code;
    if (isClientDisconnect(err)) request.log.debug("client disconnected during the stream");
    else if (unexpected) request.log.error({ err }, "chat stream failed after the response was committed");
    writer.fail(appError);
  };

  const run = async (engine: Engine, prepared: PreparedChat, signal: AbortSignal) => {
    const acc = new Accumulator();
    const timer = new GenerationTimer(ctx.metrics, model, request);
    let started = false;
    const batcher = new StreamBatcher((delta) => writer.delta(delta));
    const finish = (reason: FinishReason) => {
      batcher.flush();
      writer.finish(reason, acc);
    };
    try {
      for await (const delta of engine.chat!(req, prepared, signal)) {
        acc.add(delta);
        if (delta.type === "done") break;
        timer.piece();
        if (!started) {
          started = true;
          writer.start();
        }
        batcher.add(delta);
      }
      if (!started) {
        started = true;
        writer.start();
      }
      finish(acc.finishReason ?? "stop");
      timer.finish(acc.completionTokens);
    } catch (err) {
      if (err instanceof DeadlineExceeded && started) {
        acc.promptTokens = prepared.promptTokens;
        acc.completionTokens = acc.pieces;
        finish("length");
      } else if (sse.committed || started) {
        batcher.flush();
        failStream(err);
      } else {
        throw err;
      }
    }
    return started ? { promptTokens: acc.promptTokens || prepared.promptTokens, completionTokens: acc.completionTokens || acc.pieces } : null;
  };

  try {
    await runInference(ctx, request, {
      model,
      chat: req,
      input: { kind: "chat", req },
      prepare: (engine, signal) => prepareChat(engine, req, request.auth.plan, signal),
      // Waiting in the queue: `: keep-alive` comments every 15 s keep proxies from closing the connection.
      onQueued: () => sse.keepAliveUntilFirstFrame(),
      run,
      usage: (usage) => usage,
    });
  } catch (err) {
    if (sse.committed) return failStream(err);
    sse.dispose();
    throw err;
  }
}

/** §4.2 + §6 streaming: chat completion chunks, the usage chunk when asked for, then `data: [DONE]`. */
export async function streamChat(ctx: AppContext, request: RequestContext, body: ChatCompletionRequest, sse: SseStream): Promise<void> {
  const req = toChatRequest(body, request.auth.plan);
  const includeUsage = body.stream_options?.include_usage === true;
  const withLogprobs = req.topLogprobs !== null;
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  type Delta = ChatCompletionChunk["choices"][number]["delta"];
  type Finish = ChatCompletionChunk["choices"][number]["finish_reason"];
  const chunk = (delta: Delta, finishReason: Finish, logprobs?: TokenLogprob[]): ChatCompletionChunk => ({
    id,
    object: "chat.completion.chunk",
    created,
    model: body.model,
    choices: [{ index: 0, delta, logprobs: withLogprobs && logprobs ? { content: logprobs } : null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  });
  await streamChatTo(ctx, request, body.model, req, sse, {
    start: () => sse.send(chunk({ role: "assistant", content: "" }, null)),
    delta: (delta) => {
      if (delta.type === "content") sse.send(chunk({ content: delta.text }, null, delta.logprobs ?? []));
      else if (delta.type === "reasoning") sse.send(chunk({ reasoning_content: delta.text }, null));
      else if (delta.id !== undefined) {
        const call = { index: delta.index, id: delta.id, type: "function" as const, function: { name: delta.name ?? "", arguments: delta.arguments } };
        sse.send(chunk({ tool_calls: [call] }, null));
      } else sse.send(chunk({ tool_calls: [{ index: delta.index, function: { arguments: delta.arguments } }] }, null));
    },
    finish: (reason, output) => {
      sse.send(chunk({}, reason));
      if (includeUsage) sse.send({ id, object: "chat.completion.chunk", created, model: body.model, choices: [], usage: usageOf(output.promptTokens, output.completionTokens) });
      sse.done();
    },
    fail: (error) => sse.fail(error),
  });
}
