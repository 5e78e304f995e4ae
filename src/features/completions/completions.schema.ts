import { Type, type Static, type TSchema } from "@sinclair/typebox";

/** Optional and nullable: the openai client may send `null` for a parameter that is not set. */
const Maybe = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/**
 * OpenAI's legacy completions request. The prompt is a string, or strings (one choice each, times `n`); token-id
 * prompts are not taken. `best_of` other than 1 is refused (it would change the output); `user` is metadata and
 * ignored, as is anything else unlisted.
 */
export const CreateCompletionRequest = Type.Object(
  {
    model: Type.String({ minLength: 1 }),
    prompt: Type.Union([Type.String(), Type.Array(Type.String(), { minItems: 1, maxItems: 1024 })], { description: "A string, or strings (token-id prompts are not supported)" }),
    suffix: Maybe(Type.String({ description: "Fill-in-the-middle: the text after the gap, on models with FIM tokens" })),
    max_tokens: Maybe(Type.Integer({ minimum: 0, description: "Default 16; 0 with echo and logprobs scores the prompt alone" })),
    temperature: Maybe(Type.Number({ minimum: 0, maximum: 2 })),
    top_p: Maybe(Type.Number({ minimum: 0, maximum: 1 })),
    n: Maybe(Type.Integer({ minimum: 1, maximum: 128, description: "Choices per prompt; prompts × n is bounded per model (limits.maxCompletionChoices)" })),
    stop: Maybe(Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { maxItems: 4 })])),
    seed: Maybe(Type.Integer()),
    stream: Maybe(Type.Boolean()),
    stream_options: Maybe(Type.Object({ include_usage: Type.Optional(Type.Boolean()) })),
    logprobs: Maybe(Type.Integer({ minimum: 0, maximum: 5, description: "Alternatives per token; the chosen token is always listed too" })),
    echo: Maybe(Type.Boolean()),
    presence_penalty: Maybe(Type.Number({ minimum: -2, maximum: 2 })),
    frequency_penalty: Maybe(Type.Number({ minimum: -2, maximum: 2 })),
    logit_bias: Maybe(
      // propertyNames, not a key pattern: Fastify's Ajv removes properties outside a pattern instead of refusing them.
      Type.Record(Type.String(), Type.Number({ minimum: -100, maximum: 100 }), {
        propertyNames: { pattern: "^[0-9]{1,9}$" },
        maxProperties: 300,
        description: "Token id → logit added (-100 bans the token)",
      }),
    ),
    best_of: Maybe(Type.Integer({ minimum: 1, maximum: 1, description: "Only 1 is supported" })),
    user: Type.Optional(Type.Unknown()),
  },
  { $id: "CreateCompletionRequest" },
);
export type CreateCompletionRequest = Static<typeof CreateCompletionRequest>;

const Usage = Type.Object({ prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() });

const CompletionLogprobs = Type.Object({
  tokens: Type.Array(Type.String()),
  token_logprobs: Type.Array(Type.Union([Type.Number(), Type.Null()]), { description: "null for the prompt's first token" }),
  top_logprobs: Type.Array(Type.Union([Type.Record(Type.String(), Type.Number()), Type.Null()]), { description: "The most likely tokens and the chosen one, per position" }),
  text_offset: Type.Array(Type.Integer(), { description: "Each token's character offset in the choice's text (the echoed prompt included)" }),
});
export type CompletionLogprobs = Static<typeof CompletionLogprobs>;

/** A `text_completion`: the whole answer, or with stream: true one event of it (the same object, as OpenAI sends it). */
export const Completion = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("text_completion"),
    created: Type.Integer({ description: "Unix timestamp in seconds" }),
    model: Type.String(),
    choices: Type.Array(
      Type.Object({
        text: Type.String(),
        index: Type.Integer({ description: "prompt index × n + sample index" }),
        logprobs: Type.Union([CompletionLogprobs, Type.Null()]),
        finish_reason: Type.Union([Type.Literal("stop"), Type.Literal("length"), Type.Null()], { description: "null until a streamed choice ends" }),
      }),
    ),
    usage: Type.Optional(Type.Union([Usage, Type.Null()], { description: "Streamed: only in the last event, with stream_options.include_usage (and no choices)" })),
  },
  { $id: "Completion", description: "Streamed as `data: <completion>` events; the stream ends with `data: [DONE]`" },
);
export type Completion = Static<typeof Completion>;

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const completionsSchemas: TSchema[] = [CreateCompletionRequest, Completion];
