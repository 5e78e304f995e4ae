import { Type, type Static } from "@sinclair/typebox";

/** Optional and nullable: the openai client may send `null` for a parameter that is not set. */
const Maybe = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

export const TextPart = Type.Object({ type: Type.Literal("text"), text: Type.String() });
export const ImageUrlPart = Type.Object({
  type: Type.Literal("image_url"),
  image_url: Type.Object({
    url: Type.String({ description: "data:image/png;base64,... or data:image/jpeg;base64,..." }),
    detail: Type.Optional(Type.String()),
  }),
});
export const ContentPartSchema = Type.Union([TextPart, ImageUrlPart]);

export const ToolCallSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  type: Type.Literal("function"),
  function: Type.Object({ name: Type.String({ minLength: 1 }), arguments: Type.String() }),
});

/** §2.2. Role-specific rules (a tool message needs tool_call_id, ...) are checked by the service. */
export const ChatMessageSchema = Type.Object({
  role: Type.Union([Type.Literal("system"), Type.Literal("developer"), Type.Literal("user"), Type.Literal("assistant"), Type.Literal("tool")]),
  content: Maybe(Type.Union([Type.String(), Type.Array(ContentPartSchema)])),
  name: Type.Optional(Type.String()),
  tool_calls: Maybe(Type.Array(ToolCallSchema)),
  tool_call_id: Type.Optional(Type.String()),
});

export const ToolSchema = Type.Object({
  type: Type.Literal("function"),
  function: Type.Object({
    name: Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$" }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(Type.Object({}, { additionalProperties: true })),
    strict: Maybe(Type.Boolean()),
  }),
});

/**
 * §4.2 request. Unlisted parameters that would change the output if honoured are rejected (decisions.md):
 * `n` other than 1, non-zero `frequency_penalty`/`presence_penalty`, any `logit_bias`. `user`, `metadata`
 * and `store` are metadata and ignored; so is anything else unlisted.
 */
export const ChatCompletionRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    messages: Type.Array(ChatMessageSchema, { minItems: 1 }),
    temperature: Maybe(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Maybe(Type.Number({ minimum: 0, maximum: 1 })),
    max_tokens: Maybe(Type.Integer({ minimum: 1 })),
    max_completion_tokens: Maybe(Type.Integer({ minimum: 1 })),
    stream: Maybe(Type.Boolean()),
    stream_options: Maybe(Type.Object({ include_usage: Type.Optional(Type.Boolean()) })),
    stop: Maybe(Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { maxItems: 4 })])),
    response_format: Maybe(
      Type.Object({
        type: Type.Union([Type.Literal("text"), Type.Literal("json_object"), Type.Literal("json_schema")]),
        json_schema: Type.Optional(Type.Unknown()),
      }),
    ),
    tools: Maybe(Type.Array(ToolSchema)),
    tool_choice: Maybe(
      Type.Union([
        Type.Literal("none"),
        Type.Literal("auto"),
        Type.Literal("required"),
        Type.Object({ type: Type.Literal("function"), function: Type.Object({ name: Type.String() }) }),
      ]),
    ),
    parallel_tool_calls: Maybe(Type.Boolean()),
    seed: Maybe(Type.Integer()),
    logprobs: Maybe(Type.Boolean()),
    top_logprobs: Maybe(Type.Integer({ minimum: 0, maximum: 20 })),
    n: Maybe(Type.Integer({ minimum: 1, maximum: 1, description: "Only 1 is supported" })),
    frequency_penalty: Maybe(Type.Number({ minimum: 0, maximum: 0, description: "Only 0 is supported" })),
    presence_penalty: Maybe(Type.Number({ minimum: 0, maximum: 0, description: "Only 0 is supported" })),
    logit_bias: Type.Optional(Type.Null({ description: "Not supported" })),
    user: Type.Optional(Type.Unknown()),
    metadata: Type.Optional(Type.Unknown()),
    store: Type.Optional(Type.Unknown()),
  },
  { $id: "ChatCompletionRequest" },
);
export type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;
export type ChatMessageBody = Static<typeof ChatMessageSchema>;


/** Wire shapes (spec §2.3, §2.4), for the service's types; responses are not re-serialised through a schema. */
export interface WireToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface WireLogprobs {
  content: { token: string; logprob: number; bytes: number[]; top_logprobs: { token: string; logprob: number; bytes: number[] }[] }[];
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: "assistant"; content: string | null; reasoning_content?: string; tool_calls?: WireToolCall[] };
    logprobs: WireLogprobs | null;
    finish_reason: string;
  }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: number;
    delta: Record<string, unknown>;
    logprobs?: WireLogprobs | null;
    finish_reason: string | null;
  }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
}
