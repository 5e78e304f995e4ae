import type { ChatHistoryItem, ChatModelFunctions, ChatWrapper, LlamaGrammar, LlamaModel } from "node-llama-cpp";
import type { Capability } from "../../config/config.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import type { ChatRequest } from "../engine.ts";
import { ForcedCallChatWrapper } from "./forced-call-wrapper.ts";
import { toGbnfJsonSchema } from "./json-schema-grammar.ts";

/** What a chat request turns into for node-llama-cpp: the history, and either functions or a grammar. */
export interface GenerationPlan {
  history: ChatHistoryItem[];
  functions?: ChatModelFunctions;
  grammar?: LlamaGrammar;
  /** Set when the request forces a tool call (tool_choice required or a named function). */
  wrapper?: ChatWrapper;
}

export async function buildGenerationPlan(
  req: ChatRequest,
  ctx: { model: LlamaModel; baseWrapper: ChatWrapper; history: ChatHistoryItem[]; capabilities: ReadonlySet<Capability> },
): Promise<GenerationPlan> {
  const plan: GenerationPlan = { history: ctx.history };
  const useTools = req.tools.length > 0 && req.toolChoice !== "none";
  if (useTools) {
    if (req.responseFormat === "json_object") {
      throw new AppError("invalid_parameter", {
        param: "response_format",
        message: "response_format json_object cannot be combined with tools on this model; set tool_choice to none or drop response_format.",
      });
    }
    if (req.topLogprobs !== null) {
      throw new AppError("invalid_parameter", { param: "logprobs", message: "logprobs cannot be combined with tools on this model." });
    }
    let tools = req.tools.map((tool, i) => ({ tool, i }));
    if (typeof req.toolChoice === "object") {
      const name = req.toolChoice.name;
      tools = tools.filter(({ tool }) => tool.name === name);
      if (tools.length === 0) {
        throw new AppError("invalid_parameter", { param: "tool_choice", message: `tool_choice names '${name}', which is not in tools.` });
      }
    }
    const functions: Record<string, ChatModelFunctions[string]> = {};
    for (const { tool, i } of tools) {
      functions[tool.name] = {
        description: tool.description,
        params: toGbnfJsonSchema(tool.parameters ?? { type: "object", properties: {} }, `tools[${i}].function.parameters`),
      } as ChatModelFunctions[string];
    }
    plan.functions = functions;
    if (req.toolChoice === "required" || typeof req.toolChoice === "object") plan.wrapper = new ForcedCallChatWrapper(ctx.baseWrapper);
  } else if (req.responseFormat === "json_object") {
    if (req.topLogprobs !== null) {
      throw new AppError("invalid_parameter", { param: "logprobs", message: "logprobs cannot be combined with response_format json_object on this model." });
    }
    plan.grammar = await ctx.model.llama.getGrammarFor("json");
  }
  return plan;
}
