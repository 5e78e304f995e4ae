import type { AppContext } from "../../app-context.ts";
import { toChatRequest } from "../chat/chat.request.ts";
import type { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { prepareInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { TokenCount } from "./tokenize.schema.ts";

/**
 * POST /v1/tokenize: the prompt a chat request would put in front of the model, counted by the engine's own
 * template and tokenizer (the same prepare step as a completion, so the same 400s), without taking a slot or
 * recording usage. A Modelgate node fronting another counts prompts with it (`tokenize: modelgate`).
 */
export async function countChatTokens(ctx: AppContext, request: RequestContext, body: ChatCompletionRequest): Promise<TokenCount> {
  const req = toChatRequest(body, request.auth.plan);
  const { prepared, contextSize } = await prepareInference(ctx, request, {
    model: body.model,
    port: "chat",
    chat: req,
    input: { kind: "chat", req },
    prepare: (port, signal) => port.prepareChat(req, signal),
  });
  return { object: "tokenize", model: answerModel(request, body.model), count: prepared.promptTokens, max_model_len: contextSize };
}
