import { Type, type Static, type TSchema } from "@sinclair/typebox";

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

/** Structured outputs: the output is JSON that validates against `schema` (grammar-enforced where the engine runs the model). */
export const JsonSchemaFormatSchema = Type.Object({
  name: Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$" }),
  description: Type.Optional(Type.String()),
  schema: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: "A JSON Schema; without it, any JSON object" })),
  strict: Maybe(Type.Boolean()),
});

export const ResponseFormatSchema = Type.Object({
  type: Type.Union([Type.Literal("text"), Type.Literal("json_object"), Type.Literal("json_schema")]),
  json_schema: Type.Optional(JsonSchemaFormatSchema),
});
export type ResponseFormatBody = Static<typeof ResponseFormatSchema>;

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
    response_format: Maybe(ResponseFormatSchema),
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


const Usage = Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() });

const TopLogprob = Type.Object({ token: Type.String(), logprob: Type.Number(), bytes: Type.Array(Type.Integer()) });
const TokenLogprob = Type.Object({
  token: Type.String(),
  logprob: Type.Number(),
  bytes: Type.Array(Type.Integer()),
  top_logprobs: Type.Array(TopLogprob),
});
const Logprobs = Type.Object({ content: Type.Array(TokenLogprob) });
export type WireLogprobs = Static<typeof Logprobs>;

const WireToolCallSchema = Type.Object({
  id: Type.String(),
  type: Type.Literal("function"),
  function: Type.Object({ name: Type.String(), arguments: Type.String({ description: "JSON-encoded arguments" }) }),
});
export type WireToolCall = Static<typeof WireToolCallSchema>;

const FinishReason = Type.Union([Type.Literal("stop"), Type.Literal("length"), Type.Literal("tool_calls")]);

/** §2.3 the chat completion object (non-streaming response). */
export const ChatCompletion = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("chat.completion"),
    created: Type.Integer({ description: "Unix timestamp in seconds" }),
    model: Type.String(),
    choices: Type.Array(
      Type.Object({
        index: Type.Integer(),
        message: Type.Object({
          role: Type.Literal("assistant"),
          content: Type.Union([Type.String(), Type.Null()], { description: "null when tool calls are returned" }),
          reasoning_content: Type.Optional(Type.String({ description: "The thought of a reasoning model" })),
          tool_calls: Type.Optional(Type.Array(WireToolCallSchema)),
        }),
        logprobs: Type.Union([Logprobs, Type.Null()]),
        finish_reason: FinishReason,
      }),
    ),
    usage: Usage,
  },
  { $id: "ChatCompletion" },
);
export type ChatCompletion = Static<typeof ChatCompletion>;

/** §2.4 one chunk of a streamed completion; §6 sends each as `data: <chunk>`. */
export const ChatCompletionChunk = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("chat.completion.chunk"),
    created: Type.Integer(),
    model: Type.String(),
    choices: Type.Array(
      Type.Object({
        index: Type.Integer(),
        delta: Type.Object({
          role: Type.Optional(Type.Literal("assistant")),
          content: Type.Optional(Type.String()),
          reasoning_content: Type.Optional(Type.String()),
          tool_calls: Type.Optional(
            Type.Array(
              Type.Object({
                index: Type.Integer(),
                id: Type.Optional(Type.String()),
                type: Type.Optional(Type.Literal("function")),
                function: Type.Object({ name: Type.Optional(Type.String()), arguments: Type.String() }),
              }),
            ),
          ),
        }),
        logprobs: Type.Optional(Type.Union([Logprobs, Type.Null()])),
        finish_reason: Type.Union([FinishReason, Type.Null()], { description: "null until the final chunk" }),
      }),
    ),
    usage: Type.Optional(Type.Union([Usage, Type.Null()], { description: "With stream_options.include_usage: null, then the totals in a last chunk with no choices" })),
  },
  { $id: "ChatCompletionChunk", description: "Sent as `data: <chunk>` lines; the stream ends with `data: [DONE]`" },
);
export type ChatCompletionChunk = Static<typeof ChatCompletionChunk>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const chatSchemas: TSchema[] = [ChatCompletionRequest, ChatCompletion, ChatCompletionChunk];
