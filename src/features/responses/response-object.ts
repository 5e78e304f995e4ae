import { randomUUID } from "node:crypto";
import type { FinishReason } from "../../engines/engine.ts";
import type { AppError } from "../../errors/app-error.ts";
import { toEnvelope } from "../../errors/envelope.ts";
import type { Accumulator } from "../generation/accumulator.ts";
import type { CreateResponseRequest, OutputItem, ResponseObject } from "./responses.schema.ts";

/** `resp_…`, `msg_…`, `fc_…`, `rs_…`: the Responses API's id prefixes on a random hex body. */
export function newId(prefix: "resp" | "msg" | "fc" | "rs"): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

/**
 * What every snapshot of one response shares: its id, creation time and the request's echoed settings; `model` reads
 * the model that serves it when the snapshot is taken (a route's target, once it is chosen).
 */
export class ResponseHead {
  readonly id = newId("resp");
  readonly createdAt = Math.floor(Date.now() / 1000);

  constructor(
    private readonly body: CreateResponseRequest,
    private readonly model: () => string = () => body.model,
  ) {}

  /** The response object in a given state; `usage` is null until the end. */
  snapshot(status: ResponseObject["status"], output: OutputItem[], end: { output?: Accumulator; finishReason?: FinishReason; error?: AppError } = {}): ResponseObject {
    const body = this.body;
    return {
      id: this.id,
      object: "response",
      created_at: this.createdAt,
      status,
      error: end.error ? toEnvelope(end.error).error : null,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      model: this.model(),
      output,
      parallel_tool_calls: body.parallel_tool_calls ?? true,
      previous_response_id: null,
      reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
      store: false,
      temperature: body.temperature ?? null,
      text: { format: body.text?.format ?? { type: "text" } },
      tool_choice: body.tool_choice ?? "auto",
      tools: body.tools ?? [],
      top_p: body.top_p ?? null,
      truncation: "disabled",
      usage: end.output ? usageOf(end.output) : null,
      metadata: body.metadata ?? {},
    };
  }
}

/** `length` (max_output_tokens or the context) leaves a response incomplete; anything else completes it. */
export function endStatus(reason: FinishReason): "completed" | "incomplete" {
  return reason === "length" ? "incomplete" : "completed";
}

function usageOf(output: Accumulator): NonNullable<ResponseObject["usage"]> {
  return {
    input_tokens: output.promptTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output.completionTokens,
    output_tokens_details: { reasoning_tokens: Math.min(output.reasoningPieces, output.completionTokens) },
    total_tokens: output.promptTokens + output.completionTokens,
  };
}

/** The output items of a finished generation, in the order a model produces them: thought, text, calls. */
export function outputItemsOf(output: Accumulator, status: "completed" | "incomplete"): OutputItem[] {
  const items: OutputItem[] = [];
  if (output.reasoning.length > 0) {
    items.push({ type: "reasoning", id: newId("rs"), summary: [], content: [{ type: "reasoning_text", text: output.reasoning }], status });
  }
  if (output.content.length > 0 || output.toolCalls.length === 0) {
    items.push({ type: "message", id: newId("msg"), status, role: "assistant", content: [{ type: "output_text", text: output.content, annotations: [] }] });
  }
  for (const call of output.toolCalls) {
    items.push({ type: "function_call", id: newId("fc"), call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: "completed" });
  }
  return items;
}
