import { FormData } from "undici";
import type { EmbedResult, RerankRequest, RerankResult, TranscribeRequest, Transcript } from "../engine.ts";
import type { UpstreamCall } from "./upstream-client.ts";
import { UpstreamUnavailable } from "./upstream-errors.ts";
import type { UpstreamOptions } from "./upstream.support.ts";

type Protocol = NonNullable<UpstreamOptions["protocol"]>;
type CallShape = Pick<UpstreamCall, "path" | "root" | "json">;

const malformed = (origin: string, what: string) =>
  new UpstreamUnavailable(`The model's engine sent a malformed ${what} answer.`, null, 1000, "overloaded", `malformed ${what} answer from ${origin}`);

interface WireUsage {
  prompt_tokens?: number;
  total_tokens?: number;
  input_tokens?: number;
  output_tokens?: number;
  completion_tokens?: number;
}

const promptTokensOf = (usage: WireUsage | undefined) => usage?.prompt_tokens ?? usage?.input_tokens ?? usage?.total_tokens ?? 0;

/** OpenAI `/embeddings` (floats asked for), or TEI's `/embed`. */
export function embeddingsCall(protocol: Protocol, model: string, inputs: string[]): CallShape {
  if (protocol === "tgi") return { path: "/embed", root: true, json: { inputs, truncate: false } };
  return { path: "/embeddings", json: { model, input: inputs, encoding_format: "float" } };
}

/** Little-endian float32 in base64, as OpenAI-style servers send `encoding_format: base64`. */
function fromBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, "base64");
  const vector = new Float32Array(bytes.length / 4);
  for (let i = 0; i < vector.length; i++) vector[i] = bytes.readFloatLE(i * 4);
  return vector;
}

function toVector(value: unknown, origin: string): Float32Array {
  if (typeof value === "string") return fromBase64(value);
  if (Array.isArray(value) && value.every((x) => typeof x === "number")) return Float32Array.from(value as number[]);
  throw malformed(origin, "embeddings");
}

/** Vectors in input order, whichever form the upstream chose; usage when it reports one (TEI does not). */
export function readEmbeddings(answer: unknown, count: number, origin: string): EmbedResult {
  let vectors: Float32Array[];
  let promptTokens = 0;
  if (Array.isArray(answer)) vectors = answer.map((v) => toVector(v, origin));
  else {
    const body = answer as { data?: { index?: number; embedding?: unknown }[]; usage?: WireUsage };
    if (!Array.isArray(body?.data)) throw malformed(origin, "embeddings");
    vectors = [...body.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0)).map((d) => toVector(d.embedding, origin));
    promptTokens = promptTokensOf(body.usage);
  }
  if (vectors.length !== count) throw malformed(origin, "embeddings");
  return { vectors, promptTokens };
}

/** The Jina/Cohere `/rerank` (vLLM, llama-server, Modelgate) with every document scored, or TEI's `/rerank` with `texts`. */
export function rerankCall(protocol: Protocol, model: string, req: RerankRequest): CallShape {
  if (protocol === "tgi") return { path: "/rerank", root: true, json: { query: req.query, texts: req.documents, raw_scores: false } };
  return { path: "/rerank", json: { model, query: req.query, documents: req.documents, top_n: req.documents.length } };
}

/** One score per document in request order, from either convention. */
export function readRerank(answer: unknown, count: number, origin: string): RerankResult {
  const body = answer as { results?: { index?: number; relevance_score?: number }[]; usage?: WireUsage };
  const items = Array.isArray(answer)
    ? (answer as { index?: number; score?: number }[]).map((r) => ({ index: r.index, score: r.score }))
    : Array.isArray(body?.results)
      ? body.results.map((r) => ({ index: r.index, score: r.relevance_score }))
      : null;
  if (!items) throw malformed(origin, "rerank");
  const scores = new Array<number>(count).fill(Number.NaN);
  for (const item of items) {
    if (typeof item.index !== "number" || typeof item.score !== "number" || item.index < 0 || item.index >= count) throw malformed(origin, "rerank");
    scores[item.index] = item.score;
  }
  if (scores.some(Number.isNaN)) throw malformed(origin, "rerank");
  return { scores, promptTokens: Array.isArray(answer) ? 0 : promptTokensOf(body.usage) };
}

/** The upload as it came, with verbose_json asked for: it carries the duration and segments every format needs. */
export function transcriptionForm(model: string, req: TranscribeRequest): FormData {
  const form = new FormData();
  form.append("file", new Blob([new Uint8Array(req.file.bytes)], { type: req.file.mimetype ?? "application/octet-stream" }), req.file.filename ?? "audio");
  form.append("model", model);
  form.append("response_format", "verbose_json");
  form.append("temperature", String(req.temperature));
  if (req.language) form.append("language", req.language);
  if (req.prompt) form.append("prompt", req.prompt);
  return form;
}

interface WireTranscript {
  text?: unknown;
  language?: string;
  duration?: number;
  segments?: { id?: number; start?: number; end?: number; text?: string }[];
  usage?: WireUsage;
}

export function readTranscript(answer: unknown, req: TranscribeRequest, origin: string): Transcript {
  const body = answer as WireTranscript;
  if (typeof body?.text !== "string") throw malformed(origin, "transcription");
  const segments = (body.segments ?? []).map((s, i) => ({ id: s.id ?? i, start: s.start ?? 0, end: s.end ?? 0, text: s.text ?? "" }));
  return {
    text: body.text,
    language: body.language ?? req.language ?? "unknown",
    duration: body.duration ?? segments.at(-1)?.end ?? null,
    segments,
    completionTokens: body.usage?.output_tokens ?? body.usage?.completion_tokens ?? 0,
  };
}
