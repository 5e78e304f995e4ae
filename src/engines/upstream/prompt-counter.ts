import type { ChatRequest, CompletionRequest, TokenizeRequest } from "../engine.ts";
import { toWireMessages, toWireTools } from "./chat-wire.ts";
import type { UpstreamClient } from "./upstream-client.ts";
import type { TokenizeStrategy } from "./upstream.support.ts";

/** A prompt as the upstream's own tokenizer counts it, and the context window it reports (null when it does not). */
export interface PromptCount {
  count: number;
  contextSize: number | null;
  /** The token ids, where the upstream gave them (an older Modelgate node answers only the count). */
  tokens: number[] | null;
}

interface CountAndLimit {
  count: number;
  max_model_len?: number;
  tokens?: number[];
}

const counted = (answer: CountAndLimit): PromptCount => ({ count: answer.count, contextSize: answer.max_model_len ?? null, tokens: answer.tokens ?? null });

/**
 * Counts a chat prompt with the upstream's tokenizer, so context_length_exceeded is answered here, before any slot
 * upstream is taken. Returns null when the strategy cannot count this request (llama-server with images), and
 * the caller then relies on the upstream's own context error.
 */
export async function countPrompt(strategy: TokenizeStrategy, client: UpstreamClient, req: ChatRequest, signal: AbortSignal): Promise<PromptCount | null> {
  if (strategy === "none") return null;
  const messages = toWireMessages(req.messages);
  switch (strategy) {
    case "vllm": {
      // vLLM and SGLang: POST /tokenize with chat messages applies the model's template.
      const body = { model: client.target.model, messages, ...toWireTools(req), add_generation_prompt: true };
      return counted(await client.json<CountAndLimit>({ path: "/tokenize", root: true, json: body, signal }));
    }
    case "modelgate": {
      const body = { model: client.target.model, messages, ...toWireTools(req) };
      return counted(await client.json<CountAndLimit>({ path: "/tokenize", json: body, signal }));
    }
    case "llama-server": {
      if (req.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === "image"))) return null;
      const { prompt } = await client.json<{ prompt: string }>({ path: "/apply-template", root: true, json: { messages, ...toWireTools(req) }, signal });
      const tokens = await llamaServerTokens(client, prompt, true, true, signal);
      return { count: tokens.length, contextSize: null, tokens };
    }
  }
}

async function llamaServerTokens(client: UpstreamClient, content: string, addSpecial: boolean, parseSpecial: boolean, signal: AbortSignal): Promise<number[]> {
  const { tokens } = await client.json<{ tokens: number[] }>({ path: "/tokenize", root: true, json: { content, add_special: addSpecial, parse_special: parseSpecial }, signal });
  return tokens;
}

/** Text (special-token text read as the token) counted and tokenized by the upstream's tokenizer. */
export async function countText(strategy: Exclude<TokenizeStrategy, "none">, client: UpstreamClient, text: string, addSpecial: boolean, signal: AbortSignal): Promise<PromptCount> {
  switch (strategy) {
    case "vllm":
      return counted(await client.json<CountAndLimit>({ path: "/tokenize", root: true, json: { model: client.target.model, prompt: text, add_special_tokens: addSpecial }, signal }));
    case "modelgate":
      return counted(await client.json<CountAndLimit>({ path: "/tokenize", json: { model: client.target.model, prompt: text, add_special_tokens: addSpecial }, signal }));
    case "llama-server": {
      const tokens = await llamaServerTokens(client, text, addSpecial, true, signal);
      return { count: tokens.length, contextSize: null, tokens };
    }
  }
}

/** The FIM tokens around a prompt and its suffix (prefix, suffix and middle), which the upstream adds itself. */
const fimMarkers = 3;

/**
 * A completion's prompt as the upstream will evaluate it: the prompt with its special tokens; with a suffix, the
 * prompt and the suffix each as plain text plus the three FIM tokens (llama-server's /infill order; a model with
 * repository-level FIM tokens adds a few more, which the upstream's own window check catches).
 */
export async function countCompletion(strategy: TokenizeStrategy, client: UpstreamClient, req: CompletionRequest, signal: AbortSignal): Promise<PromptCount | null> {
  if (strategy === "none") return null;
  const prompt = await countText(strategy, client, req.prompt, true, signal);
  if (req.suffix === null) return prompt;
  const suffix = await countText(strategy, client, req.suffix, false, signal);
  return { count: prompt.count + suffix.count + fimMarkers, contextSize: prompt.contextSize, tokens: null };
}

/** What /v1/tokenize asks, by the upstream's tokenizer: text, or a chat after its template. */
export async function tokenizeWith(strategy: Exclude<TokenizeStrategy, "none">, client: UpstreamClient, req: TokenizeRequest, signal: AbortSignal): Promise<number[] | null> {
  if ("chat" in req) return (await countPrompt(strategy, client, req.chat, signal))?.tokens ?? null;
  return (await countText(strategy, client, req.text, req.addSpecial, signal)).tokens;
}

/** Token ids back to text by the upstream's tokenizer. */
export async function detokenizeWith(strategy: Exclude<TokenizeStrategy, "none">, client: UpstreamClient, tokens: readonly number[], signal: AbortSignal): Promise<string> {
  switch (strategy) {
    case "vllm":
      return (await client.json<{ prompt: string }>({ path: "/detokenize", root: true, json: { model: client.target.model, tokens }, signal, contextParam: "tokens" })).prompt;
    case "modelgate":
      return (await client.json<{ prompt: string }>({ path: "/detokenize", json: { model: client.target.model, tokens }, signal, contextParam: "tokens" })).prompt;
    case "llama-server":
      return (await client.json<{ content: string }>({ path: "/detokenize", root: true, json: { tokens }, signal })).content;
  }
}

/** llama-server's served window per sequence (`GET /props`), which its /tokenize does not report. */
export async function llamaServerContext(client: UpstreamClient, signal: AbortSignal): Promise<number | null> {
  const props = await client.json<{ default_generation_settings?: { n_ctx?: number } }>({ method: "GET", path: "/props", root: true, signal });
  return props.default_generation_settings?.n_ctx ?? null;
}

/** The vocabulary size llama-server reports for its model (`GET /v1/models`, `meta.n_vocab`). */
export async function llamaServerVocabulary(client: UpstreamClient, signal: AbortSignal): Promise<number | null> {
  const models = await client.json<{ data?: { meta?: { n_vocab?: number } }[] }>({ method: "GET", path: "/models", signal });
  return models.data?.[0]?.meta?.n_vocab ?? null;
}
