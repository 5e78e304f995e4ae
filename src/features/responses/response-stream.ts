import type { FinishReason } from "../../engines/engine.ts";
import type { AppError } from "../../errors/app-error.ts";
import type { FailureFrame, SseStream } from "../../http/sse.ts";
import type { Accumulator } from "../generation/accumulator.ts";
import type { ChatStreamWriter } from "../generation/run-chat.ts";
import type { OutputDelta } from "../generation/stream-batcher.ts";
import { endStatus, newId, type ResponseHead } from "./response-object.ts";
import type { OutputFunctionCall, OutputItem, OutputMessage, OutputReasoning } from "./responses.schema.ts";

/** The item being streamed, with its text so far (message and reasoning items have one content part). */
type OpenItem = { item: OutputMessage | OutputReasoning; text: string } | { item: OutputFunctionCall; text?: undefined };

/**
 * The Responses API's event sequence for one generation: `response.created`, `response.in_progress`, then per
 * output item `response.output_item.added`, its content part, deltas (`response.output_text.delta`,
 * `response.reasoning_text.delta`, `response.function_call_arguments.delta`) and their `.done` events, and
 * `response.output_item.done`; last `response.completed`, `response.incomplete` (max_output_tokens) or, for an
 * error after the first event, `response.failed` carrying the §7 error object. Every event has its
 * `sequence_number`. The bytes are written by http/sse.ts.
 */
export class ResponseStreamWriter implements ChatStreamWriter {
  private sequence = 0;
  private readonly output: OutputItem[] = [];
  private open: OpenItem | null = null;
  private sse: SseStream | null = null;

  constructor(private readonly head: ResponseHead) {}

  /** The stream's last event when it fails (also on shutdown): `response.failed` with the output so far. */
  readonly failureFrame: FailureFrame = (error) => ({ event: "response.failed", data: this.event("response.failed", { response: this.head.snapshot("failed", this.output, { error }) }) });

  attach(sse: SseStream): void {
    this.sse = sse;
  }

  private event(type: string, fields: Record<string, unknown>): Record<string, unknown> {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  private emit(type: string, fields: Record<string, unknown>): void {
    this.sse!.sendEvent(type, this.event(type, fields));
  }

  start(): void {
    const response = this.head.snapshot("in_progress", []);
    this.emit("response.created", { response });
    this.emit("response.in_progress", { response });
  }

  delta(delta: OutputDelta): void {
    switch (delta.type) {
      case "content":
        return this.appendText("message", delta.text);
      case "reasoning":
        return this.appendText("reasoning", delta.text);
      case "tool_call":
        if (delta.id !== undefined) {
          this.closeItem("completed");
          const item: OutputFunctionCall = { type: "function_call", id: newId("fc"), call_id: delta.id, name: delta.name ?? "", arguments: "", status: "in_progress" };
          this.openItem({ item });
        }
        if (delta.arguments.length > 0 && this.open?.item.type === "function_call") {
          this.open.item.arguments += delta.arguments;
          this.emit("response.function_call_arguments.delta", { item_id: this.open.item.id, output_index: this.output.length - 1, delta: delta.arguments });
        }
        return;
    }
  }

  finish(reason: FinishReason, output: Accumulator): void {
    const status = endStatus(reason);
    this.closeItem(status);
    const response = this.head.snapshot(status, this.output, { output, finishReason: reason });
    this.emit(status === "completed" ? "response.completed" : "response.incomplete", { response });
    this.sse!.close();
  }

  fail(error: AppError): void {
    this.sse!.fail(error);
  }

  private appendText(kind: "message" | "reasoning", text: string): void {
    if (this.open?.item.type !== kind) {
      this.closeItem("completed");
      const item: OutputMessage | OutputReasoning =
        kind === "message"
          ? { type: "message", id: newId("msg"), status: "in_progress", role: "assistant", content: [] }
          : { type: "reasoning", id: newId("rs"), summary: [], content: [], status: "in_progress" };
      this.openItem({ item, text: "" });
    }
    const open = this.open as { item: OutputMessage | OutputReasoning; text: string };
    open.text += text;
    const where = { item_id: open.item.id, output_index: this.output.length - 1, content_index: 0, delta: text };
    if (kind === "message") this.emit("response.output_text.delta", { ...where, logprobs: [] });
    else this.emit("response.reasoning_text.delta", where);
  }

  private openItem(open: OpenItem): void {
    this.open = open;
    this.output.push(open.item);
    // Serialized as it is sent, so the item shows its state at this point (no content, no arguments yet).
    this.emit("response.output_item.added", { output_index: this.output.length - 1, item: open.item });
    if (open.item.type !== "function_call") {
      const part = open.item.type === "message" ? { type: "output_text", text: "", annotations: [] } : { type: "reasoning_text", text: "" };
      this.emit("response.content_part.added", { item_id: open.item.id, output_index: this.output.length - 1, content_index: 0, part });
    }
  }

  private closeItem(status: "completed" | "incomplete"): void {
    const open = this.open;
    if (!open) return;
    this.open = null;
    const index = this.output.length - 1;
    const item = open.item;
    switch (item.type) {
      case "message":
        item.content = [{ type: "output_text", text: open.text!, annotations: [] }];
        this.emit("response.output_text.done", { item_id: item.id, output_index: index, content_index: 0, text: open.text, logprobs: [] });
        this.emit("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: item.content[0] });
        break;
      case "reasoning":
        item.content = [{ type: "reasoning_text", text: open.text! }];
        this.emit("response.reasoning_text.done", { item_id: item.id, output_index: index, content_index: 0, text: open.text });
        this.emit("response.content_part.done", { item_id: item.id, output_index: index, content_index: 0, part: item.content[0] });
        break;
      case "function_call":
        this.emit("response.function_call_arguments.done", { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments });
        break;
    }
    item.status = item.type === "function_call" ? "completed" : status;
    this.emit("response.output_item.done", { output_index: index, item });
  }
}
