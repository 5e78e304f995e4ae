import type { ModelEntry } from "../config/app-config.ts";
import type { Capability } from "../config/config.schema.ts";
import { AppError } from "../errors/app-error.ts";
import { crc32 } from "node:zlib";
import { imageSize } from "image-size";
import type { ChatRequest, CompletionRequest, EndpointPorts, Engine, EnginePort, EngineSupport, FeatureCapability, ImagePart, RequestFeature } from "./engine.ts";

const endpointWords: Record<EnginePort, string> = {
  chat: "chat completions",
  embeddings: "embeddings",
  rerank: "rerank",
  transcriptions: "audio transcription",
  completions: "text completions",
  tokenize: "tokenization",
};

const featureCapability: Record<RequestFeature, FeatureCapability> = { images: "vision", tools: "tools", json: "json", logprobs: "logprobs", prompt_logprobs: "logprobs" };
const featureWords: Record<RequestFeature, string> = {
  images: "image inputs (it is a text-only model)",
  tools: "tools",
  json: "JSON mode",
  logprobs: "logprobs",
  prompt_logprobs: "the prompt's own logprobs (echo with logprobs)",
};

/** The request's features, in the order they are checked, each with the parameter its 400 names. */
export function requestFeatures(req: ChatRequest | CompletionRequest): { feature: RequestFeature; param: string }[] {
  if ("prompt" in req) return completionFeatures(req);
  const used: { feature: RequestFeature; param: string }[] = [];
  const image = firstImageParam(req);
  if (image) used.push({ feature: "images", param: image });
  if (req.tools.length > 0) used.push({ feature: "tools", param: "tools" });
  if (req.responseFormat !== "text") used.push({ feature: "json", param: "response_format" });
  if (req.topLogprobs !== null) used.push({ feature: "logprobs", param: "logprobs" });
  return used;
}

function completionFeatures(req: CompletionRequest): { feature: RequestFeature; param: string }[] {
  const used: { feature: RequestFeature; param: string }[] = [];
  if (req.logprobs !== null) used.push({ feature: "logprobs", param: "logprobs" });
  if (req.promptLogprobs) used.push({ feature: "prompt_logprobs", param: "echo" });
  return used;
}

function firstImageParam(req: ChatRequest): string | null {
  for (const message of req.messages) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content) if (part.type === "image") return part.param;
  }
  return null;
}

/** Which entry capabilities the engine cannot provide; the config loader refuses such an entry at start. */
export function unsupportedCapabilities(entry: Pick<ModelEntry, "capabilities">, support: EngineSupport): Capability[] {
  const can = new Set<string>([...support.endpoints, ...support.features]);
  return entry.capabilities.filter((c) => !can.has(c));
}

/** The methods of each endpoint's port. */
const portMethods: Record<EnginePort, readonly [string, string]> = {
  chat: ["prepareChat", "chat"],
  embeddings: ["prepareEmbed", "embed"],
  rerank: ["prepareRerank", "rerank"],
  transcriptions: ["prepareTranscribe", "transcribe"],
  completions: ["prepareCompletion", "complete"],
  tokenize: ["tokenize", "detokenize"],
};

/**
 * The engine's port for an endpoint. `checkCapabilities` has refused an endpoint the engine's support does not
 * list, so a missing port is the engine's bug: a 500, with this message in the log.
 */
export function portOf<E extends EnginePort>(engine: Engine, endpoint: E): EndpointPorts[E] {
  const methods = engine as unknown as Record<string, unknown>;
  if (portMethods[endpoint].some((name) => typeof methods[name] !== "function")) {
    throw new Error(`the engine serves no ${endpoint} port, though its support lists ${engine.support.endpoints.join(", ")}`);
  }
  return engine as EndpointPorts[E];
}

/**
 * Whether the model (its entry's capabilities) is one the port can serve: raw-prompt completion needs a generative
 * model (`chat`); the tokenizer serves any model, a chat prompt only a chat model.
 */
function modelServes(entry: ModelEntry, port: EnginePort, req?: ChatRequest | CompletionRequest): boolean {
  if (port === "completions") return entry.capabilities.includes("chat");
  if (port === "tokenize") return !req || "prompt" in req || entry.capabilities.includes("chat");
  return entry.capabilities.includes(port);
}

/**
 * The one capability check of every inference request (decisions.md order, after scope): the model serves the
 * endpoint (400, param "model"), then each feature the request uses is one the model has (400 naming the image part,
 * `tools`, `response_format`, `logprobs` or `echo`), then no combination its engine refuses.
 */
export function checkCapabilities(entry: ModelEntry, support: EngineSupport, port: EnginePort, req?: ChatRequest | CompletionRequest): void {
  if (!modelServes(entry, port, req)) {
    const words = port === "tokenize" ? "chat templates" : endpointWords[port];
    throw new AppError("invalid_parameter", {
      param: "model",
      message: `The model '${entry.id}' does not support ${words}; it supports: ${entry.capabilities.join(", ")}.`,
    });
  }
  if (!support.endpoints.includes(port)) {
    throw new AppError("invalid_parameter", { param: "model", message: `The model '${entry.id}' does not support ${endpointWords[port]} on its engine (${entry.engine}).` });
  }
  if (!req) return;
  const used = requestFeatures(req);
  for (const { feature, param } of used) {
    const capability = featureCapability[feature];
    if (!entry.capabilities.includes(capability) || !support.features.includes(capability)) {
      throw new AppError("invalid_parameter", { param, message: `The model '${entry.id}' does not support ${featureWords[feature]}.` });
    }
  }
  // tool_choice none leaves the tools out of generation, so they combine with anything.
  const toolChoice = "prompt" in req ? "none" : req.toolChoice;
  const active = new Set(used.map((u) => u.feature).filter((f) => f !== "tools" || toolChoice !== "none"));
  for (const refusal of support.refuses) {
    if (refusal.features.every((f) => active.has(f))) throw new AppError("invalid_parameter", { param: refusal.param, message: refusal.message });
  }
}

/** A PNG's IHDR chunk (its size) is only trusted when its CRC matches: a corrupt header is an unreadable image. */
function pngHeaderIntact(data: Uint8Array): boolean {
  if (data.length < 33) return false;
  const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return view.readUInt32BE(29) === crc32(view.subarray(12, 29));
}

function imageDimensions(part: ImagePart): { width: number; height: number } {
  try {
    const { width, height } = imageSize(part.data);
    if (width && height && (part.mime !== "image/png" || pngHeaderIntact(part.data))) return { width, height };
  } catch {
    // fall through: the header cannot be read
  }
  throw overLimit(part.urlParam, `The data URL does not hold a readable ${part.mime === "image/png" ? "PNG" : "JPEG"} image.`);
}

/** What a request puts in front of the model, for its input limits. */
export type LimitedInput =
  | { kind: "chat"; req: ChatRequest }
  | { kind: "embeddings"; inputs: readonly string[] }
  | { kind: "rerank"; query: string; documents: readonly string[] }
  | { kind: "transcriptions" }
  | { kind: "completions"; prompts: readonly string[]; suffix: string | null; choices: number }
  | { kind: "tokenize" };

function overLimit(param: string, message: string): AppError {
  return new AppError("invalid_parameter", { param, message });
}

/** Keywords whose value is one subschema, a list of them, or a map of them (JSON Schema 2020-12 and draft-07). */
const oneSchema = ["items", "additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames", "contains", "not", "if", "then", "else", "contentSchema"];
const schemaLists = ["items", "prefixItems", "allOf", "anyOf", "oneOf"];
const schemaMaps = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];

const isSchema = (value: unknown): boolean => typeof value === "boolean" || (typeof value === "object" && value !== null && !Array.isArray(value));

/**
 * Subschemas in `schemas` (each object or boolean in a schema position counts one), counting stops past `cap`.
 * A walk with its own stack: a wire schema may nest deeper than the call stack.
 */
export function countSchemaNodes(schemas: readonly unknown[], cap: number): number {
  const stack = [...schemas];
  let count = 0;
  while (stack.length > 0 && count <= cap) {
    const schema = stack.pop();
    if (typeof schema === "boolean") count++;
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) continue;
    count++;
    const node = schema as Record<string, unknown>;
    for (const keyword of oneSchema) if (isSchema(node[keyword])) stack.push(node[keyword]);
    for (const keyword of schemaLists) if (Array.isArray(node[keyword])) stack.push(...(node[keyword] as unknown[]));
    for (const keyword of schemaMaps) {
      const map = node[keyword];
      if (isSchema(map) && typeof map === "object") stack.push(...Object.values(map as object).filter(isSchema));
    }
  }
  return count;
}

/** Tools in number, and their parameter schemas together, since every one is spelled out in a grammar. */
function checkTools(entry: ModelEntry, tools: ChatRequest["tools"]): void {
  const { maxTools, maxToolSchemaNodes } = entry.limits;
  if (tools.length > maxTools) throw overLimit("tools", `tools has ${tools.length} items; the model '${entry.id}' takes at most ${maxTools} per request.`);
  const nodes = countSchemaNodes(tools.map((t) => t.parameters ?? {}), maxToolSchemaNodes);
  if (nodes > maxToolSchemaNodes) {
    throw overLimit("tools", `The tools' parameter schemas hold more than ${maxToolSchemaNodes} subschemas together; the model '${entry.id}' takes at most that many per request.`);
  }
}

/**
 * The model's bounds on inputs that cost model time (`limits` in its config entry): images (count, pixels, aspect
 * ratio), tools (count, subschemas together), rerank documents (count, characters), embedding inputs (count),
 * completion choices (prompts × n).
 * Checked after the capabilities and before the engine prepares anything; a request over one is a 400 naming the
 * parameter.
 */
export function checkInputLimits(entry: ModelEntry, input: LimitedInput): void {
  const limits = entry.limits;
  switch (input.kind) {
    case "chat": {
      checkTools(entry, input.req.tools);
      let images = 0;
      for (const message of input.req.messages) {
        if (!Array.isArray(message.content)) continue;
        for (const part of message.content) {
          if (part.type !== "image") continue;
          if (++images > limits.maxImages) {
            throw overLimit(part.param, `The model '${entry.id}' takes at most ${limits.maxImages} images per request.`);
          }
          // The header alone gives the size: checked before anything decodes the pixels.
          const { width, height } = imageDimensions(part);
          const pixels = width * height;
          if (pixels > limits.maxImagePixels) {
            throw overLimit(part.param, `The image is ${width}×${height} (${pixels} pixels); the model '${entry.id}' takes at most ${limits.maxImagePixels} pixels per image.`);
          }
          const ratio = Math.max(width, height) / Math.min(width, height);
          if (ratio > limits.maxImageAspectRatio) {
            throw overLimit(part.param, `The image is ${width}×${height}; the model '${entry.id}' takes images at most ${limits.maxImageAspectRatio} times longer than wide.`);
          }
        }
      }
      return;
    }
    case "embeddings":
      if (input.inputs.length > limits.maxEmbeddingInputs) {
        throw overLimit("input", `input has ${input.inputs.length} items; the model '${entry.id}' takes at most ${limits.maxEmbeddingInputs} per request.`);
      }
      return;
    case "rerank": {
      if (input.documents.length > limits.maxRerankDocuments) {
        throw overLimit("documents", `documents has ${input.documents.length} items; the model '${entry.id}' takes at most ${limits.maxRerankDocuments} per request.`);
      }
      const chars = input.documents.reduce((n, d) => n + d.length, input.query.length);
      if (chars > limits.maxRerankChars) {
        throw overLimit("documents", `The query and documents total ${chars} characters; the model '${entry.id}' takes at most ${limits.maxRerankChars} per request.`);
      }
      return;
    }
    case "completions":
      if (input.prompts.length > limits.maxCompletionChoices) {
        throw overLimit("prompt", `prompt has ${input.prompts.length} items; the model '${entry.id}' takes at most ${limits.maxCompletionChoices} per request.`);
      }
      if (input.choices > limits.maxCompletionChoices) {
        throw overLimit("n", `The prompts times n make ${input.choices} choices; the model '${entry.id}' generates at most ${limits.maxCompletionChoices} per request.`);
      }
      return;
    case "transcriptions":
    case "tokenize":
      return;
  }
}
