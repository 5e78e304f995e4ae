import type { AppContext } from "../../app-context.ts";
import type { ChatPort, ChatRequest, FinishReason, PreparedChat } from "../../engines/engine.ts";
import type { AppError } from "../../errors/app-error.ts";
import { DeadlineExceeded, isClientDisconnect } from "../../errors/aborts.ts";
import { toAppError } from "../../errors/to-app-error.ts";
import type { SseStream } from "../../http/sse.ts";
import type { Lease } from "../../scheduler/runner-types.ts";
import { runInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import { Accumulator } from "./accumulator.ts";
import { GenerationTimer } from "./generation-timer.ts";
import { StreamBatcher, type OutputDelta } from "./stream-batcher.ts";
import { consultCache, type CacheDecision, type CachedGeneration } from "../response-cache.ts";
import { GenerationRecording, replayedOutput } from "./cached-generation.ts";

/*
 * A chat generation run through the scheduler, for every wire format that generates (chat completions, the
 * Responses API): collected to its end, or streamed into the format's writer.
 */

/** A generation run to its end: the collected output, and when it started (the wire's `created`). */
export interface CollectedChat {
  output: Accumulator;
  created: number;
}

/** Charges the account's fair share for completion pieces as they stream (the usage at the end settles the rest). */
function completionMeter(lease: Lease): (pieces: number) => void {
  let charged = 0;
  return (pieces) => {
    if (pieces > charged) lease.charge(pieces - charged);
    charged = Math.max(charged, pieces);
  };
}

/**
 * Runs a chat request to its end through the scheduler and collects its output (non-streaming wire formats); a
 * deterministic request may be answered from the response cache instead (response-cache.ts), before any of it.
 */
export async function collectChat(ctx: AppContext, request: RequestContext, model: string, chatReq: ChatRequest): Promise<CollectedChat> {
  const req = { ...chatReq, buffered: true };
  const consulting = consultCache(ctx, request, model, req);
  const cache = consulting && (await consulting);
  if (cache?.hit) return { output: replayedOutput(cache.hit), created: Math.floor(Date.now() / 1000) };
  const recording = GenerationRecording.of(ctx, req, cache);
  let created = 0;
  const output = await runInference(ctx, request, {
    model,
    port: "chat",
    chat: req,
    input: { kind: "chat", req },
    prepare: async (port, signal) => {
      const prepared = await port.prepareChat(req, signal);
      recording?.prepared(answerModel(request, model), prepared);
      return prepared;
    },
    promptTokens: (prepared) => prepared.promptTokens,
    run: async (port, prepared, signal, lease) => {
      created = Math.floor(Date.now() / 1000);
      const acc = new Accumulator();
      const timer = new GenerationTimer(ctx.metrics, answerModel(request, model), request);
      const meter = completionMeter(lease);
      try {
        for await (const run of port.chat(req, prepared, signal, lease)) {
          for (const delta of run) {
            if (delta.type !== "done") recording?.add(delta);
            acc.add(delta);
          }
          timer.run(run);
          meter(acc.pieces);
        }
        timer.finish(acc.completionTokens);
        recording?.complete(acc, request.outcome?.model ?? model);
      } catch (err) {
        if (!(err instanceof DeadlineExceeded)) throw err;
        acc.endAtDeadline(prepared.promptTokens);
      }
      return acc;
    },
    usage: (acc) => ({ promptTokens: acc.promptTokens, completionTokens: acc.completionTokens }),
  });
  return { output, created };
}

/** How a wire format writes a streamed generation; the runner below decides when each call happens. */
export interface ChatStreamWriter {
  /** Before the first delta (or at the end, when the generation produced none), with the prompt's size. */
  start(promptTokens: number): void;
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
  let cache: CacheDecision | null;
  try {
    const consulting = consultCache(ctx, request, model, req);
    cache = consulting && (await consulting);
  } catch (err) {
    sse.dispose();
    throw err;
  }
  if (cache?.hit) return replayStream(cache.hit, writer);
  const recording = GenerationRecording.of(ctx, req, cache);
  const failStream = (err: unknown) => {
    const { appError, unexpected, disconnected } = toAppError(err);
    // A client that left has no error code: nobody was answered one.
    if (request.outcome && !disconnected) request.outcome.errorCode = appError.code;
    if (isClientDisconnect(err)) request.log.debug("client disconnected during the stream");
    else if (unexpected) request.log.error({ err }, "chat stream failed after the response was committed");
    writer.fail(appError);
  };

  const run = async (port: ChatPort, prepared: PreparedChat, signal: AbortSignal, lease: Lease) => {
    const acc = new Accumulator();
    const meter = completionMeter(lease);
    const timer = new GenerationTimer(ctx.metrics, answerModel(request, model), request);
    let started = false;
    const batcher = new StreamBatcher((delta) => {
      recording?.add(delta);
      writer.delta(delta);
    });
    const finish = (reason: FinishReason) => {
      batcher.flush();
      writer.finish(reason, acc);
    };
    try {
      generation: for await (const run of port.chat(req, prepared, signal, lease)) {
        timer.run(run);
        for (const delta of run) {
          acc.add(delta);
          if (delta.type === "done") {
            meter(acc.pieces);
            break generation;
          }
          if (!started) {
            started = true;
            writer.start(prepared.promptTokens);
          }
          batcher.push(delta);
        }
        batcher.endRun();
        meter(acc.pieces);
      }
      if (!started) {
        started = true;
        writer.start(prepared.promptTokens);
      }
      batcher.flush();
      recording?.complete(acc, request.outcome?.model ?? model);
      finish(acc.finishReason ?? "stop");
      timer.finish(acc.completionTokens);
    } catch (err) {
      // Before the first delta, a deadline is 503 overloaded (the error handler's answer): nothing was produced.
      if (err instanceof DeadlineExceeded && started) {
        acc.endAtDeadline(prepared.promptTokens);
        finish("length");
      } else if (started) {
        batcher.flush();
        failStream(err);
      } else {
        // Before the first delta: runInference settles it (a client that left is charged its prompt), then the
        // catch below answers (an error event when a keep-alive committed the stream).
        throw err;
      }
    }
    return { promptTokens: acc.promptTokens || prepared.promptTokens, completionTokens: acc.completionTokens || acc.pieces };
  };

  try {
    await runInference(ctx, request, {
      model,
      port: "chat",
      chat: req,
      input: { kind: "chat", req },
      prepare: async (port, signal) => {
        const prepared = await port.prepareChat(req, signal);
        recording?.prepared(answerModel(request, model), prepared);
        return prepared;
      },
      promptTokens: (prepared) => prepared.promptTokens,
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

/** A hit into a wire format's stream writer: the miss's events, in its order and coalescing, then its end. */
function replayStream(hit: CachedGeneration, writer: ChatStreamWriter): void {
  writer.start(hit.usage.promptTokens);
  for (const delta of hit.deltas) writer.delta(delta);
  writer.finish(hit.finishReason, replayedOutput(hit));
}
