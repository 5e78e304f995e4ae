import type { ChatHistoryItem, ChatModelFunctions, ChatWrapper, GbnfJsonSchema, LlamaGrammar, LlamaModel } from "node-llama-cpp";
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

/**
 * The request has passed the capability check (src/engines/capabilities.ts: tools, JSON mode and logprobs never
 * combine on this engine) and the wire checks (a named tool_choice is one of the tools).
 */
export async function buildGenerationPlan(
  req: ChatRequest,
  ctx: { model: LlamaModel; baseWrapper: ChatWrapper; history: ChatHistoryItem[] },
): Promise<GenerationPlan> {
  const plan: GenerationPlan = { history: ctx.history };
  const useTools = req.tools.length > 0 && req.toolChoice !== "none";
  if (useTools) {
    let tools = req.tools.map((tool, i) => ({ tool, i }));
    const choice = req.toolChoice;
    if (typeof choice === "object") tools = tools.filter(({ tool }) => tool.name === choice.name);
    const functions: Record<string, ChatModelFunctions[string]> = {};
    for (const { tool, i } of tools) {
      functions[tool.name] = {
        description: tool.description,
        params: toGbnfJsonSchema(tool.parameters ?? { type: "object", properties: {} }, tool.parametersParam ?? `tools[${i}].function.parameters`, { loose: tool.looseParameters === true }),
      } as ChatModelFunctions[string];
    }
    plan.functions = functions;
    if (req.toolChoice === "required" || typeof req.toolChoice === "object") plan.wrapper = new ForcedCallChatWrapper(ctx.baseWrapper);
  } else if (req.responseFormat === "json_schema" && req.jsonSchema?.schema) {
    const schema = toGbnfJsonSchema(req.jsonSchema.schema, "response_format.json_schema.schema");
    plan.grammar = await ctx.model.llama.createGrammarForJsonSchema<GbnfJsonSchema>(schema);
  } else if (req.responseFormat !== "text") {
    plan.grammar = await ctx.model.llama.getGrammarFor("json");
  }
  return plan;
}
