import type { FinishReason } from "../../engines/engine.ts";
import type { AppError } from "../../errors/app-error.ts";
import { toAnthropicError } from "../../errors/anthropic-envelope.ts";
import type { FailureFrame, SseStream, StreamEvent } from "../../http/sse.ts";
import type { Accumulator } from "../generation/accumulator.ts";
import type { ChatStreamWriter } from "../generation/run-chat.ts";
import type { OutputDelta } from "../generation/stream-batcher.ts";
import { signatureOf, stopOf, toolInput, toolUseId, usageOf } from "./message-object.ts";

/** The block being streamed, with what it has received so far. */
type OpenBlock = { type: "text" | "thinking"; text: string } | { type: "tool_use"; name: string; json: string };

/**
 * Anthropic's event sequence for one generation: `message_start`; per block `content_block_start`, its deltas
 * (`text_delta`, `thinking_delta` then one `signature_delta`, `input_json_delta` as the call is generated) and
 * `content_block_stop`; then `message_delta` (stop_reason and usage) and `message_stop`. An error after the start is
 * one `error` event; `ping` keeps a queued request's connection alive. The bytes are written by http/sse.ts.
 */
export class MessageStreamWriter implements ChatStreamWriter {
  private sse: SseStream | null = null;
  private index = -1;
  private open: OpenBlock | null = null;

  constructor(
    private readonly id: string,
    private readonly model: () => string,
  ) {}

  readonly failureFrame: FailureFrame = (error) => ({ event: "error", data: toAnthropicError(error).body });
  static readonly ping: StreamEvent = { event: "ping", data: { type: "ping" } };

  attach(sse: SseStream): void {
    this.sse = sse;
  }

  private emit(type: string, fields: Record<string, unknown>): void {
    this.sse!.sendEvent(type, { type, ...fields });
  }

  start(promptTokens = 0): void {
    const message = { id: this.id, type: "message", role: "assistant", model: this.model(), content: [], stop_reason: null, stop_sequence: null, usage: usageOf(promptTokens, 0) };
    this.emit("message_start", { message });
  }

  delta(delta: OutputDelta): void {
    switch (delta.type) {
      case "content":
        this.appendText("text", delta.text);
        return;
      case "reasoning":
        this.appendText("thinking", delta.text);
        return;
      case "tool_call":
        if (delta.id !== undefined) {
          const name = delta.name ?? "";
          this.openBlock({ type: "tool_use", name, json: "" }, { type: "tool_use", id: toolUseId(delta.id), name, input: {} });
        }
        if (delta.arguments.length > 0 && this.open?.type === "tool_use") {
          this.open.json += delta.arguments;
          this.emit("content_block_delta", { index: this.index, delta: { type: "input_json_delta", partial_json: delta.arguments } });
        }
        return;
    }
  }

  finish(reason: FinishReason, output: Accumulator): void {
    // A generation with no output still has its (empty) text block, as the message object does.
    if (this.index < 0) this.openBlock({ type: "text", text: "" }, { type: "text", text: "" });
    // A call that max_tokens cut short has streamed what it had; stop_reason max_tokens says why it is partial.
    this.closeBlock(reason === "length");
    const usage = usageOf(output.promptTokens, output.completionTokens, output.cachedPromptTokens);
    this.emit("message_delta", { delta: stopOf(reason, output), usage });
    this.emit("message_stop", {});
    this.sse!.close();
  }

  fail(error: AppError): void {
    this.sse!.fail(error);
  }

  private appendText(type: "text" | "thinking", text: string): void {
    if (this.open?.type !== type) this.openBlock({ type, text: "" }, type === "text" ? { type, text: "" } : { type, thinking: "", signature: "" });
    (this.open as { text: string }).text += text;
    const delta = type === "text" ? { type: "text_delta", text } : { type: "thinking_delta", thinking: text };
    this.emit("content_block_delta", { index: this.index, delta });
  }

  private openBlock(open: OpenBlock, contentBlock: Record<string, unknown>): void {
    this.closeBlock();
    this.open = open;
    this.index++;
    this.emit("content_block_start", { index: this.index, content_block: contentBlock });
  }

  private closeBlock(cut = false): void {
    const open = this.open;
    if (!open) return;
    this.open = null;
    // A call whose arguments do not parse fails the stream here (an error event), before its block is closed.
    if (open.type === "tool_use" && !cut) toolInput(open.name, open.json);
    if (open.type === "thinking") this.emit("content_block_delta", { index: this.index, delta: { type: "signature_delta", signature: signatureOf(open.text) } });
    this.emit("content_block_stop", { index: this.index });
  }
}
