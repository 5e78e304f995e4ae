import type { CompletionDelta, CompletionLogprob, CompletionRequest } from "../engine.ts";

/*
 * Raw-prompt completions on an upstream: OpenAI's legacy /v1/completions (vLLM, SGLang, llama-server, Ollama,
 * another Modelgate node), or llama-server's own /infill for fill-in-the-middle. Requests are always streamed with
 * usage asked for, as chat's are.
 */

export interface CompletionWireOptions {
  model: string;
  /** The completion budget to send, or null to leave it to the upstream. */
  maxTokens: number | null;
  defaults: { temperature?: number; topP?: number };
}

function sampling(req: CompletionRequest, options: CompletionWireOptions): Record<string, unknown> {
  const temperature = req.temperature ?? options.defaults.temperature;
  const topP = req.topP ?? options.defaults.topP;
  return {
    ...(temperature !== undefined ? { temperature } : {}),
    ...(topP !== undefined ? { top_p: topP } : {}),
    ...(req.seed !== null ? { seed: req.seed } : {}),
    ...(req.stop.length > 0 ? { stop: req.stop } : {}),
    ...(req.presencePenalty !== 0 ? { presence_penalty: req.presencePenalty } : {}),
    ...(req.frequencyPenalty !== 0 ? { frequency_penalty: req.frequencyPenalty } : {}),
    ...(req.logitBias.size > 0 ? { logit_bias: Object.fromEntries([...req.logitBias].map(([token, bias]) => [String(token), bias])) } : {}),
  };
}

/** The /v1/completions body: one prompt, one choice (the service runs the choices), streamed with usage. */
export function toWireCompletion(req: CompletionRequest, options: CompletionWireOptions): Record<string, unknown> {
  return {
    model: options.model,
    prompt: req.prompt,
    stream: true,
    stream_options: { include_usage: true },
    ...(options.maxTokens !== null ? { max_tokens: options.maxTokens } : {}),
    ...sampling(req, options),
    ...(req.suffix !== null ? { suffix: req.suffix } : {}),
    ...(req.logprobs !== null ? { logprobs: req.logprobs } : {}),
    ...(req.promptLogprobs ? { echo: true } : {}),
  };
}

/** llama-server's /infill body: the prompt is the text before the gap, the suffix the text after it. */
export function toWireInfill(req: CompletionRequest, options: CompletionWireOptions): Record<string, unknown> {
  return {
    input_prefix: req.prompt,
    input_suffix: req.suffix ?? "",
    stream: true,
    ...(options.maxTokens !== null ? { n_predict: options.maxTokens } : {}),
    ...sampling(req, options),
    ...(req.logprobs !== null ? { n_probs: req.logprobs } : {}),
  };
}

/** One streamed event of /v1/completions (OpenAI's legacy shape, or llama-server's chat-shaped logprobs). */
export interface WireCompletionChunk {
  choices?: {
    text?: string | null;
    logprobs?: WireLegacyLogprobs | { content?: WireTokenLogprob[] | null } | null;
    finish_reason?: string | null;
  }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: unknown;
  /** llama-server's own shape (/infill): the text so far, its probabilities, and at the end its counts. */
  content?: string;
  completion_probabilities?: WireTokenLogprob[];
  stop?: boolean;
  stop_type?: string;
  tokens_predicted?: number;
  tokens_evaluated?: number;
}

interface WireLegacyLogprobs {
  tokens?: string[];
  token_logprobs?: (number | null)[];
  top_logprobs?: (Record<string, number> | null)[] | null;
  text_offset?: number[];
}

interface WireTokenLogprob {
  token: string;
  logprob: number;
  top_logprobs?: { token: string; logprob: number }[];
}

/** Logprobs in either wire shape, with each token's offset in the text (legacy shape only). */
function readLogprobs(wire: NonNullable<NonNullable<WireCompletionChunk["choices"]>[number]["logprobs"]>): { entries: CompletionLogprob[]; offsets: number[] | null } {
  if ("content" in wire) {
    return { entries: (wire.content ?? []).map((t) => ({ token: t.token, logprob: t.logprob, top: (t.top_logprobs ?? []).map(({ token, logprob }) => ({ token, logprob })) })), offsets: null };
  }
  const legacy = wire as WireLegacyLogprobs;
  const entries = (legacy.tokens ?? []).map((token, i): CompletionLogprob => {
    const top = legacy.top_logprobs?.[i] ?? null;
    return { token, logprob: legacy.token_logprobs?.[i] ?? null, top: top ? Object.entries(top).map(([t, logprob]) => ({ token: t, logprob })).sort((a, b) => b.logprob - a.logprob) : [] };
  });
  return { entries, offsets: legacy.text_offset ?? null };
}

/**
 * Turns an upstream's completion events into our deltas. With echo (the prompt's logprobs asked for), the upstream
 * sends the prompt first, in the text of its first event and among its first logprobs: the first `promptLength`
 * characters are the prompt (which we echo from the request), and the tokens whose offset falls in them are the
 * prompt's, passed on as the `prompt` delta.
 */
export class CompletionChunkReader {
  finishReason: "stop" | "length" | null = null;
  usage: { promptTokens: number; completionTokens: number } | null = null;
  /** Text pieces seen: the completion estimate when the upstream reports no usage. */
  pieces = 0;
  private promptLeft: number;
  private promptEntries: CompletionLogprob[] = [];

  constructor(echo: { promptLength: number } | null) {
    this.promptLeft = echo ? echo.promptLength : -1;
  }

  read(chunk: WireCompletionChunk): CompletionDelta[] {
    if (chunk.choices === undefined && (chunk.content !== undefined || chunk.stop !== undefined)) return this.readInfill(chunk);
    if (chunk.usage && typeof chunk.usage.prompt_tokens === "number") {
      this.usage = { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens ?? 0 };
    }
    const choice = chunk.choices?.[0];
    if (!choice) return [];
    const out: CompletionDelta[] = [];
    let text = choice.text ?? "";
    let logprobs = choice.logprobs ? readLogprobs(choice.logprobs) : null;
    if (this.promptLeft >= 0) {
      const echoed = Math.min(this.promptLeft, text.length);
      const inPrompt = logprobs?.offsets ? logprobs.offsets.filter((offset) => offset < this.promptLeft).length : 0;
      if (logprobs) {
        this.promptEntries.push(...logprobs.entries.slice(0, inPrompt));
        logprobs = { entries: logprobs.entries.slice(inPrompt), offsets: null };
      }
      text = text.slice(echoed);
      this.promptLeft -= echoed;
      if (this.promptLeft === 0) {
        this.promptLeft = -1;
        out.push({ type: "prompt", logprobs: this.promptEntries });
      }
    }
    if (text.length > 0 || (logprobs && logprobs.entries.length > 0)) {
      this.pieces += logprobs?.entries.length || 1;
      out.push({ type: "text", text, ...(logprobs ? { logprobs: logprobs.entries } : {}) });
    }
    if (choice.finish_reason) this.finishReason = choice.finish_reason === "length" ? "length" : "stop";
    return out;
  }

  /** At the end of the stream: the prompt's logprobs, if the upstream echoed less text than the prompt has. */
  flush(): CompletionDelta[] {
    if (this.promptLeft < 0) return [];
    this.promptLeft = -1;
    return [{ type: "prompt", logprobs: this.promptEntries }];
  }

  private readInfill(chunk: WireCompletionChunk): CompletionDelta[] {
    const out: CompletionDelta[] = [];
    const logprobs = chunk.completion_probabilities ? readLogprobs({ content: chunk.completion_probabilities }).entries : undefined;
    if (chunk.content || logprobs?.length) {
      this.pieces += logprobs?.length || 1;
      out.push({ type: "text", text: chunk.content ?? "", ...(logprobs ? { logprobs } : {}) });
    }
    if (chunk.stop) {
      this.finishReason = chunk.stop_type === "limit" ? "length" : "stop";
      if (typeof chunk.tokens_evaluated === "number") this.usage = { promptTokens: chunk.tokens_evaluated, completionTokens: chunk.tokens_predicted ?? 0 };
    }
    return out;
  }
}
