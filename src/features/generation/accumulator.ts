import type { ChatDelta, FinishReason, TokenLogprob } from "../../engines/engine.ts";

/** A tool call as the wire formats carry it (chat's `tool_calls[i]`; the Responses API reads its name and arguments). */
export interface CollectedToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** Collects engine deltas into the non-stream message (§2.3). */
export class Accumulator {
  content = "";
  reasoning = "";
  logprobs: TokenLogprob[] = [];
  toolCalls: CollectedToolCall[] = [];
  finishReason: FinishReason | null = null;
  /** The stop string that ended the generation, when the engine says (Anthropic's `stop_sequence`). */
  stopSequence: string | null = null;
  /** Of promptTokens, those the engine took from its KV cache, when it says (0 otherwise). */
  cachedPromptTokens = 0;
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
        this.stopSequence = delta.stopSequence ?? null;
        this.cachedPromptTokens = delta.cachedPromptTokens ?? 0;
        this.promptTokens = delta.usage.promptTokens;
        this.completionTokens = delta.usage.completionTokens;
        break;
    }
  }

  /**
   * The request's deadline cut the generation: what was produced is the answer, ended as if max_tokens had been
   * reached, its completion tokens counted one per piece (the engine never reported usage).
   */
  endAtDeadline(promptTokens: number): void {
    this.finishReason = "length";
    this.promptTokens = promptTokens;
    this.completionTokens = this.pieces;
  }
}
