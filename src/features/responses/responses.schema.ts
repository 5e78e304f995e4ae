import { Type, type Static, type TSchema } from "@sinclair/typebox";

/** Optional and nullable: clients send `null` for a parameter that is not set. */
const Maybe = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

const InputText = Type.Object({ type: Type.Literal("input_text"), text: Type.String() });
const InputImage = Type.Object({
  type: Type.Literal("input_image"),
  image_url: Type.String({ description: "data:image/png;base64,... or data:image/jpeg;base64,..." }),
  detail: Type.Optional(Type.String()),
});
const OutputText = Type.Object({ type: Type.Literal("output_text"), text: Type.String(), annotations: Type.Optional(Type.Array(Type.Unknown())) });
const Refusal = Type.Object({ type: Type.Literal("refusal"), refusal: Type.String() });

export const MessageItem = Type.Object({
  type: Type.Optional(Type.Literal("message")),
  role: Type.Union([Type.Literal("user"), Type.Literal("system"), Type.Literal("developer"), Type.Literal("assistant")]),
  content: Type.Union([Type.String(), Type.Array(Type.Union([InputText, InputImage, OutputText, Refusal]))]),
  id: Type.Optional(Type.String()),
  status: Type.Optional(Type.String()),
});
export const FunctionCallItem = Type.Object({
  type: Type.Literal("function_call"),
  call_id: Type.String({ minLength: 1 }),
  name: Type.String({ minLength: 1 }),
  arguments: Type.String({ description: "JSON-encoded arguments" }),
  id: Type.Optional(Type.String()),
  status: Type.Optional(Type.String()),
});
export const FunctionCallOutputItem = Type.Object({
  type: Type.Literal("function_call_output"),
  call_id: Type.String({ minLength: 1 }),
  output: Type.Union([Type.String(), Type.Array(InputText)]),
  id: Maybe(Type.String()),
  status: Maybe(Type.String()),
});
/** A reasoning item sent back with the conversation: accepted, and left out of the prompt (as reasoning_content is in chat). */
export const ReasoningItem = Type.Object(
  { type: Type.Literal("reasoning"), id: Type.Optional(Type.String()), summary: Type.Optional(Type.Array(Type.Unknown())) },
  { additionalProperties: true },
);
/** Needs a stored response; this service keeps none, so the shape check refuses it naming the item. */
export const ItemReference = Type.Object({ type: Type.Literal("item_reference"), id: Type.String() });

export const InputItem = Type.Union([MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem, ItemReference]);
export type InputItem = Static<typeof InputItem>;

export const FunctionTool = Type.Object({
  type: Type.Literal("function"),
  name: Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$" }),
  description: Maybe(Type.String()),
  parameters: Maybe(Type.Object({}, { additionalProperties: true })),
  strict: Maybe(Type.Boolean()),
});

/** The OpenAI API's built-in tools: recognised so the refusal names the tool's type (responses.request.ts), never run. */
export const builtInToolTypes = [
  "web_search",
  "web_search_preview",
  "file_search",
  "computer_use_preview",
  "code_interpreter",
  "image_generation",
  "mcp",
  "local_shell",
  "shell",
  "custom",
  "apply_patch",
] as const;
export const BuiltInTool = Type.Object(
  { type: Type.Union(builtInToolTypes.map((t) => Type.Literal(t)), { description: "Refused with 400 invalid_parameter: only function tools are served" }) },
  { additionalProperties: true },
);

export const TextFormat = Type.Object({
  type: Type.Union([Type.Literal("text"), Type.Literal("json_object"), Type.Literal("json_schema")]),
  name: Type.Optional(Type.String({ pattern: "^[A-Za-z0-9_-]{1,64}$" })),
  description: Type.Optional(Type.String()),
  schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  strict: Maybe(Type.Boolean()),
});

/**
 * The stateless subset of the Responses API, served on the chat path. What needs stored state
 * (`previous_response_id`, `store: true`, `background`, `conversation`, item references) or a built-in tool is a
 * 400 naming the field; unlisted metadata is ignored, as in chat.
 */
export const CreateResponseRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    input: Type.Union([Type.String(), Type.Array(InputItem, { minItems: 1 })]),
    instructions: Maybe(Type.String()),
    max_output_tokens: Maybe(Type.Integer({ minimum: 1 })),
    temperature: Maybe(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Maybe(Type.Number({ minimum: 0, maximum: 1 })),
    text: Maybe(Type.Object({ format: Type.Optional(TextFormat), verbosity: Maybe(Type.String()) })),
    tools: Maybe(Type.Array(Type.Union([FunctionTool, BuiltInTool]))),
    tool_choice: Maybe(
      Type.Union([
        Type.Literal("none"),
        Type.Literal("auto"),
        Type.Literal("required"),
        Type.Object({ type: Type.Literal("function"), name: Type.String() }),
      ]),
    ),
    parallel_tool_calls: Maybe(Type.Boolean()),
    stream: Maybe(Type.Boolean()),
    store: Maybe(Type.Boolean({ description: "Only false: responses are not stored" })),
    previous_response_id: Maybe(Type.String({ description: "Not supported: responses are not stored" })),
    background: Maybe(Type.Boolean({ description: "Only false" })),
    conversation: Type.Optional(Type.Null({ description: "Not supported: conversations are not stored" })),
    truncation: Maybe(Type.Literal("disabled", { description: "Only disabled: a prompt over the context is context_length_exceeded" })),
    reasoning: Maybe(Type.Object({ effort: Maybe(Type.String()), summary: Maybe(Type.String()) }, { description: "Accepted; a local reasoning model has no effort setting" })),
    include: Maybe(Type.Array(Type.String())),
    metadata: Maybe(Type.Record(Type.String(), Type.String())),
    user: Type.Optional(Type.Unknown()),
    service_tier: Type.Optional(Type.Unknown()),
    prompt_cache_key: Type.Optional(Type.Unknown()),
    safety_identifier: Type.Optional(Type.Unknown()),
    stream_options: Type.Optional(Type.Unknown()),
  },
  { $id: "CreateResponseRequest" },
);
export type CreateResponseRequest = Static<typeof CreateResponseRequest>;

const OutputTextPart = Type.Object({ type: Type.Literal("output_text"), text: Type.String(), annotations: Type.Array(Type.Unknown()) });
const ReasoningTextPart = Type.Object({ type: Type.Literal("reasoning_text"), text: Type.String() });
const ItemStatus = Type.Union([Type.Literal("in_progress"), Type.Literal("completed"), Type.Literal("incomplete")]);

export const OutputMessage = Type.Object({
  type: Type.Literal("message"),
  id: Type.String(),
  status: ItemStatus,
  role: Type.Literal("assistant"),
  content: Type.Array(OutputTextPart),
});
export const OutputFunctionCall = Type.Object({
  type: Type.Literal("function_call"),
  id: Type.String(),
  call_id: Type.String(),
  name: Type.String(),
  arguments: Type.String(),
  status: ItemStatus,
});
export const OutputReasoning = Type.Object({
  type: Type.Literal("reasoning"),
  id: Type.String(),
  summary: Type.Array(Type.Unknown(), { description: "Always empty: the model's thought is in content" }),
  content: Type.Array(ReasoningTextPart),
  status: ItemStatus,
});
export const OutputItem = Type.Union([OutputMessage, OutputFunctionCall, OutputReasoning]);
export type OutputItem = Static<typeof OutputItem>;
export type OutputMessage = Static<typeof OutputMessage>;
export type OutputFunctionCall = Static<typeof OutputFunctionCall>;
export type OutputReasoning = Static<typeof OutputReasoning>;

const ResponseUsage = Type.Object({
  input_tokens: Type.Integer(),
  input_tokens_details: Type.Object({ cached_tokens: Type.Integer() }),
  output_tokens: Type.Integer(),
  output_tokens_details: Type.Object({ reasoning_tokens: Type.Integer() }),
  total_tokens: Type.Integer(),
});

export const ResponseObject = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("response"),
    created_at: Type.Integer({ description: "Unix timestamp in seconds" }),
    status: Type.Union([Type.Literal("in_progress"), Type.Literal("completed"), Type.Literal("incomplete"), Type.Literal("failed")]),
    error: Type.Union([Type.Null(), Type.Object({ message: Type.String(), type: Type.String(), code: Type.String(), param: Type.Union([Type.String(), Type.Null()]) }, { description: "§7's error object" })]),
    incomplete_details: Type.Union([Type.Null(), Type.Object({ reason: Type.Literal("max_output_tokens") })]),
    instructions: Type.Union([Type.String(), Type.Null()]),
    max_output_tokens: Type.Union([Type.Integer(), Type.Null()]),
    model: Type.String(),
    output: Type.Array(OutputItem),
    parallel_tool_calls: Type.Boolean(),
    previous_response_id: Type.Null(),
    reasoning: Type.Object({ effort: Type.Union([Type.String(), Type.Null()]), summary: Type.Union([Type.String(), Type.Null()]) }),
    store: Type.Literal(false),
    temperature: Type.Union([Type.Number(), Type.Null()]),
    text: Type.Object({ format: Type.Unknown() }),
    tool_choice: Type.Unknown(),
    tools: Type.Array(Type.Unknown()),
    top_p: Type.Union([Type.Number(), Type.Null()]),
    truncation: Type.Literal("disabled"),
    usage: Type.Union([ResponseUsage, Type.Null()], { description: "null until the response ends" }),
    metadata: Type.Record(Type.String(), Type.String()),
  },
  { $id: "Response" },
);
export type ResponseObject = Static<typeof ResponseObject>;

export const ResponseStreamEvent = Type.Object(
  {
    type: Type.String({ description: "response.created, response.in_progress, response.output_item.added, response.content_part.added, response.output_text.delta, ..., response.completed | response.incomplete | response.failed" }),
    sequence_number: Type.Integer(),
  },
  { $id: "ResponseStreamEvent", additionalProperties: true, description: "Sent as `event: <type>` + `data: <event>`; the stream ends after its last event, with no [DONE]" },
);

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const responsesSchemas: TSchema[] = [CreateResponseRequest, ResponseObject, ResponseStreamEvent];
