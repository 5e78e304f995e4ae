import type { AppContext, TokenAmount } from "../../app-context.ts";
import type { ChatRequest, PreparedChat } from "../../engines/engine.ts";
import { defaultReservation } from "../inference.ts";
import type { CacheDecision, CachedDelta, CachedGeneration } from "../response-cache.ts";
import { Accumulator } from "./accumulator.ts";

/**
 * A miss's answer as it is produced, for the response cache (issue 45): the output events in the order (and, when
 * streamed, the coalescing) the client got them, and what the request reserved at admission. Written only when
 * the generation ends by itself: a failure, a disconnect or the deadline writes nothing.
 */
export class GenerationRecording {
  private readonly deltas: CachedDelta[] = [];
  private reserved: TokenAmount | null = null;

  private constructor(
    private readonly save: NonNullable<CacheDecision["save"]>,
    private readonly ctx: AppContext,
    private readonly req: ChatRequest,
  ) {}

  /** A recording when the cache stores this request's answer; null otherwise. */
  static of(ctx: AppContext, req: ChatRequest, decision: CacheDecision | null): GenerationRecording | null {
    return decision?.save ? new GenerationRecording(decision.save, ctx, req) : null;
  }

  /** The prepared request: a hit reserves what this one reserves (the same default reservation, runInference's). */
  prepared(model: string, prepared: PreparedChat): void {
    this.reserved = defaultReservation(prepared, { kind: "chat", req: this.req }, this.ctx.catalog.find(model)?.entry.contextSize ?? null);
  }

  add(delta: CachedDelta): void {
    this.deltas.push(delta);
  }

  /** The generation ended by itself (stop, length or tool calls): the entry is written. */
  complete(output: Accumulator, servedBy: string): void {
    if (!this.reserved || output.finishReason === null) return;
    this.save({
      deltas: this.deltas,
      finishReason: output.finishReason,
      ...(output.stopSequence !== null ? { stopSequence: output.stopSequence } : {}),
      usage: { promptTokens: output.promptTokens, completionTokens: output.completionTokens },
      reserved: this.reserved,
      servedBy,
    });
  }
}

/** A hit's output, collected as the miss's was (non-stream wire formats). */
export function replayedOutput(hit: CachedGeneration): Accumulator {
  const output = new Accumulator();
  for (const delta of hit.deltas) output.add(delta);
  output.add({ type: "done", finishReason: hit.finishReason, usage: hit.usage, stopSequence: hit.stopSequence });
  return output;
}
