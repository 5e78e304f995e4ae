import { Type, type Static, type TSchema } from "@sinclair/typebox";

/*
 * Anthropic's Messages API (anthropic-version 2023-06-01). Request objects stay open: fields this server does not
 * implement (cache_control, citations, context_management, output_config, defer_loading, ...) are ignored.
 */

const CacheControl = { cache_control: Type.Optional(Type.Unknown({ description: "Accepted and ignored: prefix reuse is automatic" })) };

export const TextBlockParam = Type.Object({ type: Type.Literal("text"), text: Type.String(), ...CacheControl });
const ImageSource = Type.Union([
  Type.Object({
    type: Type.Literal("base64"),
    media_type: Type.String({ description: "image/png or image/jpeg" }),
    data: Type.String(),
  }),
  Type.Object({ type: Type.Literal("url"), url: Type.String({ description: "A data: URL; remote URLs are not fetched" }) }),
]);
export type TextBlockParam = Static<typeof TextBlockParam>;
export const ImageBlockParam = Type.Object({ type: Type.Literal("image"), source: ImageSource, ...CacheControl });
export type ImageBlockParam = Static<typeof ImageBlockParam>;
const ToolUseBlockParam = Type.Object({
  type: Type.Literal("tool_use"),
  id: Type.String({ minLength: 1 }),
  name: Type.String({ minLength: 1 }),
  input: Type.Unknown({ description: "The call's arguments (an object)" }),
  ...CacheControl,
});
const ToolResultBlockParam = Type.Object({
  type: Type.Literal("tool_result"),
  tool_use_id: Type.String({ minLength: 1 }),
  content: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Union([TextBlockParam, ImageBlockParam]))])),
  is_error: Type.Optional(Type.Boolean()),
  ...CacheControl,
});
/** A thought given back in a later turn: accepted and left out of the prompt, as reasoning_content is in chat. */
const ThinkingBlockParam = Type.Object({ type: Type.Literal("thinking"), thinking: Type.String(), signature: Type.Optional(Type.String()), ...CacheControl });
const RedactedThinkingBlockParam = Type.Object({ type: Type.Literal("redacted_thinking"), data: Type.String(), ...CacheControl });

export const ContentBlockParam = Type.Union([TextBlockParam, ImageBlockParam, ToolUseBlockParam, ToolResultBlockParam, ThinkingBlockParam, RedactedThinkingBlockParam]);
export type ContentBlockParam = Static<typeof ContentBlockParam>;

export const MessageParam = Type.Object({
  // "system" inside messages is not Anthropic's, but Claude Code sends it at times: it joins the system prompt.
  role: Type.Union([Type.Literal("user"), Type.Literal("assistant"), Type.Literal("system")]),
  content: Type.Union([Type.String(), Type.Array(ContentBlockParam)]),
});
export type MessageParam = Static<typeof MessageParam>;

export const ToolParam = Type.Object({
  name: Type.String({ pattern: "^[A-Za-z0-9_-]{1,128}$" }),
  description: Type.Optional(Type.String()),
  input_schema: Type.Optional(Type.Object({}, { additionalProperties: true })),
  type: Type.Optional(Type.String({ description: "custom (or absent) is served; Anthropic's server tools (web_search_…, bash_…) are ignored" })),
  strict: Type.Optional(Type.Boolean({ description: "true: input_schema is enforced as chat's tools are (a keyword the engine cannot enforce is a 400); otherwise such keywords are dropped" })),
  ...CacheControl,
});
export type ToolParam = Static<typeof ToolParam>;

const ParallelSwitch = { disable_parallel_tool_use: Type.Optional(Type.Boolean({ description: "Accepted: the local engines make one call per turn" })) };
export const ToolChoiceParam = Type.Union([
  Type.Object({ type: Type.Union([Type.Literal("auto"), Type.Literal("any"), Type.Literal("none")]), ...ParallelSwitch }),
  Type.Object({ type: Type.Literal("tool"), name: Type.String({ minLength: 1 }), ...ParallelSwitch }),
]);

export const ThinkingParam = Type.Union([
  Type.Object({ type: Type.Literal("enabled"), budget_tokens: Type.Integer({ minimum: 1 }) }),
  Type.Object({ type: Type.Literal("adaptive") }),
  Type.Object({ type: Type.Literal("disabled") }),
]);

const requestFields = {
  model: Type.String({ minLength: 1 }),
  messages: Type.Array(MessageParam, { minItems: 1 }),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(TextBlockParam)])),
  tools: Type.Optional(Type.Array(ToolParam)),
  tool_choice: Type.Optional(ToolChoiceParam),
  thinking: Type.Optional(ThinkingParam),
};

export const MessagesRequest = Type.Object(
  {
    ...requestFields,
    max_tokens: Type.Integer({ minimum: 1, description: "Capped to what the model's context window leaves after the prompt" }),
    stop_sequences: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    top_k: Type.Optional(Type.Integer({ minimum: 0, description: "Accepted; not applied" })),
    stream: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Type.Object({ user_id: Type.Optional(Type.Union([Type.String(), Type.Null()])) })),
  },
  { $id: "MessagesRequest", description: "Anthropic's Messages API request; fields not listed are ignored" },
);
export type MessagesRequest = Static<typeof MessagesRequest>;

export const CountTokensRequest = Type.Object(requestFields, { $id: "CountTokensRequest", description: "The same body as POST /v1/messages, without max_tokens" });
export type CountTokensRequest = Static<typeof CountTokensRequest>;

export const CountTokensResponse = Type.Object({ input_tokens: Type.Integer() }, { $id: "CountTokensResponse" });
export type CountTokensResponse = Static<typeof CountTokensResponse>;

const TextBlock = Type.Object({ type: Type.Literal("text"), text: Type.String() });
const ThinkingBlock = Type.Object({ type: Type.Literal("thinking"), thinking: Type.String(), signature: Type.String() });
const ToolUseBlock = Type.Object({ type: Type.Literal("tool_use"), id: Type.String(), name: Type.String(), input: Type.Record(Type.String(), Type.Unknown()) });
export const ContentBlock = Type.Union([TextBlock, ThinkingBlock, ToolUseBlock]);
export type ContentBlock = Static<typeof ContentBlock>;

export const StopReason = Type.Union([Type.Literal("end_turn"), Type.Literal("max_tokens"), Type.Literal("stop_sequence"), Type.Literal("tool_use")]);
export type StopReason = Static<typeof StopReason>;

export const MessageUsage = Type.Object({
  input_tokens: Type.Integer(),
  output_tokens: Type.Integer(),
  cache_read_input_tokens: Type.Integer(),
  cache_creation_input_tokens: Type.Integer(),
});
export type MessageUsage = Static<typeof MessageUsage>;

export const MessageObject = Type.Object(
  {
    id: Type.String({ description: "msg_…" }),
    type: Type.Literal("message"),
    role: Type.Literal("assistant"),
    model: Type.String(),
    content: Type.Array(ContentBlock),
    stop_reason: Type.Union([StopReason, Type.Null()], { description: "null only in message_start" }),
    stop_sequence: Type.Union([Type.String(), Type.Null()]),
    usage: MessageUsage,
  },
  { $id: "Message" },
);
export type MessageObject = Static<typeof MessageObject>;

export const MessageStreamEvent = Type.Object(
  {
    type: Type.String({
      description: "message_start, content_block_start, content_block_delta, content_block_stop, message_delta, message_stop, ping, or error",
    }),
  },
  { $id: "MessageStreamEvent", additionalProperties: true, description: "Sent as `event: <type>` + `data: <event>`; the stream ends after message_stop (or error)" },
);

/** Anthropic's error body, on every non-2xx answer of these routes. */
export const AnthropicErrorEnvelope = Type.Object(
  {
    type: Type.Literal("error"),
    error: Type.Object({
      type: Type.Union(
        ["invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large", "rate_limit_error", "api_error", "overloaded_error"].map((t) =>
          Type.Literal(t),
        ),
      ),
      message: Type.String(),
    }),
  },
  { $id: "AnthropicErrorEnvelope", description: "Anthropic's error body" },
);
export type AnthropicErrorEnvelope = Static<typeof AnthropicErrorEnvelope>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const messagesSchemas: TSchema[] = [MessagesRequest, CountTokensRequest, CountTokensResponse, MessageObject, MessageStreamEvent, AnthropicErrorEnvelope];
