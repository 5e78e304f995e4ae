import type { AppContext } from "../../app-context.ts";
import { toChatRequest } from "../chat/chat.request.ts";
import type { ChatCompletionRequest } from "../chat/chat.schema.ts";
import { invalid } from "../generation/generation.request.ts";
import { prepareInference } from "../inference.ts";
import { answerModel, type RequestContext } from "../request-context.ts";
import type { DetokenizeRequest, DetokenizeResponse, TokenCount, TokenizeRequest } from "./tokenize.schema.ts";

/*
 * POST /v1/tokenize and /v1/detokenize in vLLM's shapes, with the model's own tokenizer (and chat template for
 * messages): the same checks and prepare step as a completion, so the same 400s, without taking a slot, reserving
 * tokens or recording usage; the request limit counts them as requests. A chat prompt needs a chat key (it is what
 * a chat completion would send, and a Modelgate node fronting another counts prompts with it: `tokenize: modelgate`);
 * text and token ids need a key that may call the model on any of its endpoints.
 */

export async function tokenize(ctx: AppContext, request: RequestContext, body: TokenizeRequest): Promise<TokenCount> {
  if ((body.prompt === undefined) === (body.messages === undefined)) invalid("prompt", "Give either prompt (text) or messages (a chat), not both or neither.");
  if (body.messages === undefined) {
    const text = body.prompt!;
    const { prepared: tokens, contextSize } = await prepareInference(ctx, request, {
      model: body.model,
      port: "tokenize",
      grantedBy: "model",
      input: { kind: "tokenize" },
      prepare: (port, signal) => port.tokenize({ text, addSpecial: body.add_special_tokens ?? true }, signal),
    });
    return { object: "tokenize", model: answerModel(request, body.model), count: tokens.length, max_model_len: contextSize, tokens };
  }
  if (body.add_generation_prompt === false) invalid("add_generation_prompt", "The messages are counted as a chat completion sends them: with the generation prompt.");
  if (body.continue_final_message === true) invalid("continue_final_message", "The messages are counted as a chat completion sends them: the last message is not continued.");
  if (body.add_special_tokens === true) invalid("add_special_tokens", "The chat template places the model's special tokens; add_special_tokens is only taken with prompt.");
  const req = toChatRequest(body as ChatCompletionRequest, request.auth.plan);
  const { prepared: tokens, contextSize } = await prepareInference(ctx, request, {
    model: body.model,
    port: "tokenize",
    chat: req,
    input: { kind: "chat", req },
    prepare: (port, signal) => port.tokenize({ chat: req }, signal),
  });
  return { object: "tokenize", model: answerModel(request, body.model), count: tokens.length, max_model_len: contextSize, tokens };
}

export async function detokenize(ctx: AppContext, request: RequestContext, body: DetokenizeRequest): Promise<DetokenizeResponse> {
  const { prepared: prompt } = await prepareInference(ctx, request, {
    model: body.model,
    port: "tokenize",
    grantedBy: "model",
    input: { kind: "tokenize" },
    prepare: (port, signal) => port.detokenize(body.tokens, signal),
  });
  return { prompt };
}
