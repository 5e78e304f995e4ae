import type { ChatRequest } from "../engine.ts";
import { toWireMessages, toWireTools } from "./chat-wire.ts";
import type { UpstreamClient } from "./upstream-client.ts";

export type TokenizeStrategy = "vllm" | "llama-server" | "modelgate" | "none";

/** A chat prompt as the upstream's own tokenizer counts it, and the context window it reports (null when it does not). */
export interface PromptCount {
  count: number;
  contextSize: number | null;
}

interface CountAndLimit {
  count: number;
  max_model_len?: number;
}

/**
 * Counts a chat prompt with the upstream's tokenizer, so context_length_exceeded is answered here, before any slot
 * upstream is taken. Returns null when the strategy cannot count this request (llama-server with images), and
 * the caller then relies on the upstream's own context error.
 */
export async function countPrompt(strategy: TokenizeStrategy, client: UpstreamClient, req: ChatRequest, signal: AbortSignal): Promise<PromptCount | null> {
  const messages = toWireMessages(req.messages);
  switch (strategy) {
    case "none":
      return null;
    case "vllm": {
      // vLLM and SGLang: POST /tokenize with chat messages applies the model's template.
      const body = { model: client.target.model, messages, ...toWireTools(req), add_generation_prompt: true };
      const answer = await client.json<CountAndLimit>({ path: "/tokenize", root: true, json: body, signal });
      return { count: answer.count, contextSize: answer.max_model_len ?? null };
    }
    case "modelgate": {
      const body = { model: client.target.model, messages, ...toWireTools(req) };
      const answer = await client.json<CountAndLimit>({ path: "/tokenize", json: body, signal });
      return { count: answer.count, contextSize: answer.max_model_len ?? null };
    }
    case "llama-server": {
      if (req.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === "image"))) return null;
      const { prompt } = await client.json<{ prompt: string }>({ path: "/apply-template", root: true, json: { messages, ...toWireTools(req) }, signal });
      const { tokens } = await client.json<{ tokens: unknown[] }>({ path: "/tokenize", root: true, json: { content: prompt, add_special: true, parse_special: true }, signal });
      return { count: tokens.length, contextSize: null };
    }
  }
}

/** llama-server's served window per sequence (`GET /props`), which its /tokenize does not report. */
export async function llamaServerContext(client: UpstreamClient, signal: AbortSignal): Promise<number | null> {
  const props = await client.json<{ default_generation_settings?: { n_ctx?: number } }>({ method: "GET", path: "/props", root: true, signal });
  return props.default_generation_settings?.n_ctx ?? null;
}
