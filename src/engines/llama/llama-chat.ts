import { randomInt } from "node:crypto";
import { LlamaChat, type ChatWrapper, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import { AsyncQueue } from "../../workers/async-queue.ts";
import type { ChatDelta, ChatRequest } from "../engine.ts";
import type { GenerationPlan } from "./generation-plan.ts";
import { sampleTokens } from "./token-sampler.ts";

export interface ChatRun {
  model: LlamaModel;
  /** The wrapper generation uses (the plan's own, for a forced call, takes its place). */
  wrapper: ChatWrapper;
  sequence: LlamaContextSequence;
  req: ChatRequest;
  plan: GenerationPlan;
  /** The templated prompt, tokenized. */
  tokens: Token[];
  promptTokens: number;
  maxTokens: number;
  temperature: number;
  topP: number;
  signal: AbortSignal;
}

/**
 * One chat on a lent sequence: the token sampler for logprobs (it reads the model's distributions), otherwise
 * LlamaChat, whose chunks (text, thought segments, function-call parameters) become our deltas as they come.
 */
export async function* chatOnSequence(run: ChatRun): AsyncIterable<ChatDelta> {
  const { model, wrapper, sequence, req, plan, signal } = run;
  if (req.topLogprobs !== null) {
    yield* sampleTokens({
      model,
      sequence,
      promptTokens: run.tokens,
      maxTokens: run.maxTokens,
      temperature: run.temperature,
      topP: run.topP,
      seed: req.seed,
      stop: req.stop,
      topLogprobs: req.topLogprobs,
      signal,
    });
    return;
  }
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  const startTokens = sequence.tokenMeter.usedOutputTokens;
  // What the sequence already holds of this prompt is not evaluated again (but its last token always is).
  const cachedPromptTokens = Math.max(0, Math.min(sequence.compareContextTokens(run.tokens).firstDifferentIndex, run.tokens.length - 1));
  const chat = new LlamaChat({ contextSequence: sequence, chatWrapper: plan.wrapper ?? wrapper });
  // The consumer (SSE, accounting) takes each chunk on the next turn: by then LlamaChat has queued the next token's
  // decode, and the consumer's work overlaps it instead of delaying it.
  const queue = new AsyncQueue<ChatDelta>({ wakeNextTurn: true });
  let callIndex = -1;
  let pendingSpace = "";
  const generation = chat
    .generateResponse(plan.history, {
      signal: stop.signal,
      stopOnAbortSignal: true,
      maxTokens: run.maxTokens,
      temperature: run.temperature,
      topP: run.topP,
      topK: 0,
      // node-llama-cpp seeds an unseeded request with the current second: same-second requests would repeat.
      seed: req.seed ?? randomInt(2 ** 31),
      customStopTriggers: req.stop.length > 0 ? req.stop : undefined,
      budgets: { thoughtTokens: Infinity },
      ...(plan.functions
        ? {
            functions: plan.functions,
            documentFunctionParams: true,
            maxParallelFunctionCalls: 1,
            onFunctionCallParamsChunk: (chunk) => {
              if (chunk.callIndex !== callIndex) {
                callIndex = chunk.callIndex;
                pendingSpace = "";
                queue.push({ type: "tool_call", index: callIndex, id: newToolCallId(), name: chunk.functionName, arguments: "" });
              }
              // The call grammar lets whitespace trail the arguments object; hold it back until more JSON follows.
              if (chunk.paramsChunk.trim().length === 0) pendingSpace += chunk.paramsChunk;
              else {
                queue.push({ type: "tool_call", index: callIndex, arguments: pendingSpace + chunk.paramsChunk });
                pendingSpace = "";
              }
            },
          }
        : { grammar: plan.grammar }),
      onResponseChunk: (chunk) => {
        if (chunk.text.length === 0) return;
        if (chunk.type === "segment") {
          if (chunk.segmentType === "thought") queue.push({ type: "reasoning", text: chunk.text });
        } else queue.push({ type: "content", text: chunk.text });
      },
    })
    .then(
      (result) => {
        const reason = result.metadata.stopReason;
        // A generation cut by the signal (deadline or disconnect) ends like one cut by max_tokens, with the
        // tokens really generated, so usage stays exact.
        const finishReason =
          reason === "maxTokens" || reason === "abort"
            ? "length"
            : reason === "functionCalls" || (result.functionCalls?.length ?? 0) > 0
              ? "tool_calls"
              : "stop";
        const trigger = result.metadata.stopReason === "customStopTrigger" ? result.metadata.customStopTrigger : null;
        queue.push({
          type: "done",
          finishReason,
          usage: { promptTokens: run.promptTokens, completionTokens: sequence.tokenMeter.usedOutputTokens - startTokens },
          cachedPromptTokens,
          ...(trigger ? { stopSequence: trigger.filter((part) => typeof part === "string").join("") } : {}),
        });
        queue.end();
      },
      (err: unknown) => queue.end(err),
    );
  try {
    yield* queue;
  } finally {
    signal.removeEventListener("abort", onAbort);
    stop.abort();
    await generation;
    chat.dispose({ disposeSequence: false });
  }
}

function newToolCallId(): string {
  return `call_${crypto.randomUUID().replace(/-/g, "").slice(0, 24)}`;
}
