import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { ChatCompletionRequest } from "../chat/chat.schema.ts";

/** Optional and nullable, as the other request schemas take them. */
const Maybe = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/**
 * vLLM's tokenize request: `{model, prompt}` (text as it is), or `{model, messages}` after the model's chat template,
 * which is also the body of a chat completion (its other fields, tools included, are taken as chat takes them).
 */
export const TokenizeRequest = Type.Object(
  {
    ...ChatCompletionRequest.properties,
    messages: Type.Optional(ChatCompletionRequest.properties.messages),
    prompt: Type.Optional(Type.String({ description: "Text to tokenize as it is (special-token text is the token); give this or messages" })),
    add_special_tokens: Maybe(Type.Boolean({ description: "With prompt: the model's start token first (default true). With messages the template places them" })),
    add_generation_prompt: Maybe(Type.Boolean({ description: "With messages: only true (the count is of what a completion would send)" })),
    continue_final_message: Maybe(Type.Boolean({ description: "With messages: only false" })),
    return_token_strs: Type.Optional(Type.Unknown({ description: "Ignored: the answer has no token strings" })),
  },
  { $id: "TokenizeRequest" },
);
export type TokenizeRequest = Static<typeof TokenizeRequest>;

/** What /v1/tokenize answers: vLLM's field names (`count`, `max_model_len`, `tokens`), so one client reads both. */
export const TokenCount = Type.Object(
  {
    object: Type.Literal("tokenize"),
    model: Type.String(),
    /** The prompt's tokens: the text's, or the messages' (and tools') after the model's chat template. */
    count: Type.Integer({ minimum: 0 }),
    /** The context window the model is served with, when known. */
    max_model_len: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()]),
    tokens: Type.Array(Type.Integer({ minimum: 0 }), { description: "The token ids, `count` of them" }),
  },
  { $id: "TokenCount" },
);
export type TokenCount = Static<typeof TokenCount>;

/** vLLM's detokenize request. The body limit bounds the list. */
export const DetokenizeRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    tokens: Type.Array(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
  },
  { $id: "DetokenizeRequest" },
);
export type DetokenizeRequest = Static<typeof DetokenizeRequest>;

export const DetokenizeResponse = Type.Object({ prompt: Type.String() }, { $id: "DetokenizeResponse" });
export type DetokenizeResponse = Static<typeof DetokenizeResponse>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const tokenizeSchemas: TSchema[] = [TokenizeRequest, TokenCount, DetokenizeRequest, DetokenizeResponse];
