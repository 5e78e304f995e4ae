import type { Plan } from "../../config/app-config.ts";
import type { CompletionRequest } from "../../engines/engine.ts";
import { invalid } from "../generation/generation.request.ts";
import type { CreateCompletionRequest } from "./completions.schema.ts";

/** OpenAI's default completion length for legacy completions. */
const defaultMaxTokens = 16;

/** A legacy completion request as the engine runs it: its prompts, and one engine request per choice. */
export interface CompletionPlan {
  prompts: string[];
  /** Choices per prompt. */
  n: number;
  /** Choice `i` is sample `i % n` of prompt `floor(i / n)`, as OpenAI numbers them. */
  choices: CompletionRequest[];
  /** The prompt goes in front of each choice's text. */
  echo: boolean;
}

/**
 * Turns the wire request into the engine's requests, checking what the schema cannot: combinations, the plan's
 * output cap. These are parameter errors, so they come before the model lookup (decisions.md order). The chat
 * template is never applied: the prompt is the prompt.
 */
export function toCompletionPlan(body: CreateCompletionRequest, plan: Plan): CompletionPlan {
  const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
  const suffix = body.suffix ?? null;
  const echo = body.echo === true;
  if (echo && suffix !== null) invalid("echo", "echo cannot be combined with suffix: a fill-in-the-middle answer is the middle alone.");
  const cap = plan.maxOutputTokens;
  const maxTokens = body.max_tokens ?? Math.min(defaultMaxTokens, cap ?? defaultMaxTokens);
  if (cap !== null && maxTokens > cap) invalid("max_tokens", `max_tokens may be at most ${cap} on this plan.`);
  if (maxTokens === 0 && !echo) invalid("max_tokens", "max_tokens 0 asks for no completion: it is only taken with echo, to score the prompt.");
  const n = body.n ?? 1;
  const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  const logitBias = new Map(Object.entries(body.logit_bias ?? {}).map(([token, bias]) => [Number(token), bias]));
  const logprobs = body.logprobs ?? null;
  const choices: CompletionRequest[] = [];
  prompts.forEach((prompt, p) => {
    for (let sample = 0; sample < n; sample++) {
      choices.push({
        prompt,
        promptParam: typeof body.prompt === "string" ? "prompt" : `prompt[${p}]`,
        suffix,
        maxTokens,
        outputCap: cap,
        temperature: body.temperature ?? null,
        topP: body.top_p ?? null,
        // The samples of one prompt differ, and the same seed gives the same choices.
        seed: body.seed == null ? null : body.seed + sample,
        stop,
        presencePenalty: body.presence_penalty ?? 0,
        frequencyPenalty: body.frequency_penalty ?? 0,
        logitBias,
        logprobs,
        promptLogprobs: echo && logprobs !== null,
      });
    }
  });
  return { prompts, n, choices, echo };
}
