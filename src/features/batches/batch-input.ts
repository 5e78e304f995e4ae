import type { AppError } from "../../errors/app-error.ts";
import type { BatchError, BatchLine } from "../../store/batches.repo.ts";

/** The most lines one batch takes (the OpenAI API's limit too). */
export const maxBatchLines = 50_000;
/** The most validation errors a failed batch reports. */
const maxErrors = 100;

export interface ParsedInput {
  lines: BatchLine[];
  errors: BatchError[];
  /** The models the lines name (the batch's concurrency is the largest `parallel` among them). */
  models: Set<string>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Reads a batch input file: one JSON request per line, `{custom_id, method: "POST", url, body}`, as the OpenAI API
 * takes it. Every line is checked before the batch is accepted: JSON, custom_id (unique), method, url (the batch's
 * endpoint) and the body against the endpoint's own schema (`validate`: the same compiled schema as the route's,
 * which also fills its defaults in). Errors carry the 1-based line, with the OpenAI codes.
 */
export function parseBatchInput(content: Buffer, endpoint: string, validate: (body: Record<string, unknown>) => AppError | null): ParsedInput {
  const lines: BatchLine[] = [];
  const errors: BatchError[] = [];
  const models = new Set<string>();
  const seen = new Set<string>();
  const add = (line: number | null, code: string, message: string, param: string | null = null) => {
    if (errors.length < maxErrors) errors.push({ code, message, param, line });
  };
  const text = content.toString("utf8").split("\n");
  if (text.at(-1)?.trim() === "") text.pop();
  if (text.length === 0) {
    add(null, "empty_file", "The input file is empty.");
    return { lines, errors, models };
  }
  if (text.length > maxBatchLines) {
    add(null, "too_many_tasks", `The input file has ${text.length} lines; a batch takes at most ${maxBatchLines}.`);
    return { lines, errors, models };
  }
  for (const [i, raw] of text.entries()) {
    const line = i + 1;
    let request: unknown;
    try {
      request = JSON.parse(raw);
    } catch {
      add(line, "invalid_json_line", "This line is not parseable as valid JSON.");
      continue;
    }
    if (!isObject(request)) {
      add(line, "invalid_json_line", "This line is not a JSON object.");
      continue;
    }
    const customId = request.custom_id;
    if (typeof customId !== "string" || customId.length === 0) {
      add(line, "invalid_request", "The line has no custom_id (a non-empty string).", "custom_id");
      continue;
    }
    if (seen.has(customId)) {
      add(line, "duplicate_custom_id", `The custom_id '${customId}' appears on an earlier line; each line needs its own.`, "custom_id");
      continue;
    }
    seen.add(customId);
    if (request.method !== "POST") {
      add(line, "invalid_request", "The method must be 'POST'.", "method");
      continue;
    }
    if (request.url !== endpoint) {
      add(line, "url_mismatch", `The url must be the batch's endpoint '${endpoint}', not ${JSON.stringify(request.url)}.`, "url");
      continue;
    }
    const body = request.body;
    if (!isObject(body)) {
      add(line, "invalid_request", "The body must be a JSON object: the request to the endpoint.", "body");
      continue;
    }
    if (body.stream === true) {
      add(line, "invalid_request", "Batch lines cannot stream: leave stream unset or false.", "body.stream");
      continue;
    }
    const error = validate(body);
    if (error) {
      add(line, "invalid_request", error.message, error.param ? `body.${error.param}` : "body");
      continue;
    }
    if (typeof body.model === "string") models.add(body.model);
    lines.push({ line, customId, body: JSON.stringify(body) });
  }
  return { lines, errors, models };
}
