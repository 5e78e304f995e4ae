import type { Plan } from "../../config/app-config.ts";
import type { ChatRequest, ToolChoice, ToolDefinition } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";

/*
 * The checks chat completions and the Responses API make alike on their way to the engine's ChatRequest, each
 * called with that API's own parameter names (`max_tokens` or `max_output_tokens`, `tools[i].function.name` or
 * `tools[i].name`, `response_format` or `text.format`), so every 400 names what the client sent.
 */

export function invalid(param: string, message: string): never {
  throw new AppError("invalid_parameter", { param, message });
}

/** An output format as chat's `response_format` carries it (the Responses API's `text.format` is mapped to it). */
export interface FormatBody {
  type: "text" | "json_object" | "json_schema";
  json_schema?: { name: string; schema?: Record<string, unknown>; strict?: boolean | null };
}

/**
 * The requested completion length (`param` names it) and the plan's output cap (`maxOutputTokens`), which refuses a
 * longer one here and bounds an omitted one in the engine's prepare (context-window.ts fitCompletion).
 */
export function outputLength(maxTokens: number | null, param: string, plan: Plan): Pick<ChatRequest, "maxTokens" | "outputCap"> {
  if (maxTokens !== null && plan.maxOutputTokens !== null && maxTokens > plan.maxOutputTokens) {
    invalid(param, `${param} may be at most ${plan.maxOutputTokens} on this plan.`);
  }
  return { maxTokens, outputCap: plan.maxOutputTokens };
}

/** Checks the declared tools (no name twice) and resolves `tool_choice` against them. */
export function toToolChoice(tools: ToolDefinition[], nameParam: (i: number) => string, choice: ToolChoice | null | undefined): ToolChoice {
  const names = new Set<string>();
  tools.forEach((t, i) => {
    if (names.has(t.name)) invalid(nameParam(i), `The function name '${t.name}' is declared twice.`);
    names.add(t.name);
  });
  if (choice == null) return tools.length > 0 ? "auto" : "none";
  if (typeof choice === "object" && !names.has(choice.name)) invalid("tool_choice", `tool_choice names '${choice.name}', which is not in tools.`);
  if (choice === "required" && tools.length === 0) invalid("tool_choice", "tool_choice required needs tools.");
  return choice;
}

/** `response_format` (chat) or `text.format` (responses) as the engine takes it; `param` names it in errors. */
export function toResponseFormat(body: FormatBody | null | undefined, param: string): Pick<ChatRequest, "responseFormat" | "jsonSchema"> {
  const type = body?.type ?? "text";
  if (type !== "json_schema") return { responseFormat: type };
  const spec = body?.json_schema;
  if (!spec) invalid(`${param}.json_schema`, "response_format json_schema needs json_schema: {name, schema}.");
  return { responseFormat: type, jsonSchema: { name: spec.name, schema: spec.schema ?? null, strict: spec.strict ?? false } };
}
