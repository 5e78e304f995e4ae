import { setImmediate as nextTurn } from "node:timers/promises";
import type { AppError } from "../../errors/app-error.ts";
import type { BatchError, BatchLine } from "../../store/batches.repo.ts";
import { jsonlLines } from "./jsonl-lines.ts";

/** The most lines one batch takes (the OpenAI API's limit too). */
const maxBatchLines = 50_000;
/** The most validation errors a failed batch reports. */
const maxErrors = 100;
/** Lines handed on at a time, and the most bytes among them (a page is one statement, on SQLite a blocking one). */
const pageLines = 500;
const pageBytes = 256 * 1024;
/** The longest run of checks between two turns of the event loop. */
const sliceMs = 10;

export interface InputCheck {
  /** The good lines read (handed to `addPage` when there is one). */
  lines: number;
  errors: BatchError[];
  /** The models the lines name (the batch's concurrency is the largest `parallel` among them). */
  models: Set<string>;
  /** `addPage` answered false: the reading stopped there. */
  stopped: boolean;
}

export interface InputRules {
  /** The batch's endpoint: every line's `url`. */
  endpoint: string;
  /** The body against the endpoint's own schema (the route's compiled validator, which fills its defaults in). */
  validate: (body: Record<string, unknown>) => AppError | null;
  /** The longest line: the plan's largest request body, which the endpoint itself would take. */
  maxLineBytes: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

type Checked = BatchLine | Omit<BatchError, "line">;

/**
 * One line, `{custom_id, method: "POST", url, body}` as the OpenAI API takes it: the line to run (its body as JSON
 * when `keep`), or its error.
 */
function checkLine(text: string | null, rules: InputRules, seen: Set<string>, models: Set<string>, line: number, keep: boolean): Checked {
  const error = (code: string, message: string, param: string | null = null) => ({ code, message, param });
  if (text === null) return error("request_too_large", `This line is longer than ${rules.maxLineBytes} bytes, the largest request body this plan takes (maxBodyBytes).`);
  let request: unknown;
  try {
    request = JSON.parse(text);
  } catch {
    return error("invalid_json_line", "This line is not parseable as valid JSON.");
  }
  if (!isObject(request)) return error("invalid_json_line", "This line is not a JSON object.");
  const customId = request.custom_id;
  if (typeof customId !== "string" || customId.length === 0) return error("invalid_request", "The line has no custom_id (a non-empty string).", "custom_id");
  if (seen.has(customId)) return error("duplicate_custom_id", `The custom_id '${customId}' appears on an earlier line; each line needs its own.`, "custom_id");
  seen.add(customId);
  if (request.method !== "POST") return error("invalid_request", "The method must be 'POST'.", "method");
  if (request.url !== rules.endpoint) return error("url_mismatch", `The url must be the batch's endpoint '${rules.endpoint}', not ${JSON.stringify(request.url)}.`, "url");
  const body = request.body;
  if (!isObject(body)) return error("invalid_request", "The body must be a JSON object: the request to the endpoint.", "body");
  if (body.stream === true) return error("invalid_request", "Batch lines cannot stream: leave stream unset or false.", "body.stream");
  const invalid = rules.validate(body);
  if (invalid) return error("invalid_request", invalid.message, invalid.param ? `body.${invalid.param}` : "body");
  if (typeof body.model === "string") models.add(body.model);
  return { line, customId, body: keep ? JSON.stringify(body) : "" };
}

/**
 * Reads a batch input file as its chunks come from the store and checks every line: JSON, custom_id (unique),
 * method, url (the batch's endpoint) and the body against the endpoint's schema. Errors are listed with the 1-based
 * line and the OpenAI codes (at most 100). With `addPage`, the good lines (their bodies with the schema's defaults
 * filled in) go to it a page at a time, until an error or until it answers false. The checks give the event loop a
 * turn every few milliseconds, so a 100 MiB file never stalls the server, and at most one page of lines is held.
 */
export async function checkBatchInput(chunks: AsyncIterable<Buffer>, rules: InputRules, addPage?: (lines: BatchLine[]) => Promise<boolean>): Promise<InputCheck> {
  const errors: BatchError[] = [];
  const models = new Set<string>();
  const seen = new Set<string>();
  let page: BatchLine[] = [];
  let bytes = 0;
  let lines = 0;
  let count = 0;
  let sliceStart = performance.now();
  const flush = async () => {
    const ok = page.length === 0 || !addPage || (await addPage(page));
    lines += page.length;
    page = [];
    bytes = 0;
    return ok;
  };
  for await (const { number, text } of jsonlLines(chunks, rules.maxLineBytes)) {
    count = number;
    if (number > maxBatchLines) {
      const message = `The input file has more than ${maxBatchLines} lines, the most a batch takes.`;
      return { lines, errors: [{ code: "too_many_tasks", message, param: null, line: null }], models, stopped: false };
    }
    const checked = checkLine(text, rules, seen, models, number, addPage !== undefined);
    if ("code" in checked) {
      errors.push({ ...checked, line: number });
      if (errors.length === maxErrors) break;
      page = [];
    } else if (errors.length === 0) {
      page.push(checked);
      bytes += checked.body.length + checked.customId.length;
      if ((page.length >= pageLines || bytes >= pageBytes) && !(await flush())) return { lines, errors, models, stopped: true };
    }
    if (performance.now() - sliceStart >= sliceMs) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
  if (count === 0) errors.push({ code: "empty_file", message: "The input file is empty.", param: null, line: null });
  if (errors.length === 0 && !(await flush())) return { lines, errors, models, stopped: true };
  return { lines, errors, models, stopped: false };
}
