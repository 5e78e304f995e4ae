import type { FastifyRequest } from "fastify";
import type { Multipart, MultipartFile } from "@fastify/multipart";
import { AppError, isAppError } from "../../errors/app-error.ts";
import { whisperLanguages } from "./languages.ts";
import type { TranscriptionFormat, TranscriptionInput } from "./transcription.schema.ts";

const formats: readonly string[] = ["json", "text", "verbose_json"];
const maxFieldBytes = 256 * 1024;

const bad = (param: string, message: string) => new AppError("invalid_parameter", { param, message });

/** Maps @fastify/multipart and busboy errors to the §7 contract; never a 500 for a malformed upload. */
function uploadError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const e = err as { code?: string; message?: string };
  switch (e.code) {
    case "FST_REQ_FILE_TOO_LARGE":
      return new AppError("request_too_large", { message: "The uploaded file exceeds the plan's upload size limit." });
    case "FST_FILES_LIMIT":
      return bad("file", "Send exactly one file, in the field 'file'.");
    case "FST_FIELDS_LIMIT":
    case "FST_PARTS_LIMIT":
      return bad("file", "The form has too many fields.");
    case "FST_INVALID_MULTIPART_CONTENT_TYPE":
      return bad("file", "The request must be multipart/form-data with a 'file' field.");
    case "FST_PROTO_VIOLATION":
      return bad("file", "The form has a forbidden field name.");
    default:
      return bad("file", `The multipart upload is malformed: ${e.message ?? String(err)}.`);
  }
}

async function readFile(part: MultipartFile, limit: number): Promise<Uint8Array> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of part.file as AsyncIterable<Buffer>) {
    total += chunk.length;
    // busboy stops at the limit and marks the stream truncated; stop reading at once (the rest is never buffered).
    if (part.file.truncated || total > limit) {
      throw new AppError("request_too_large", {
        message: `The uploaded file exceeds the plan's upload size limit of ${limit} bytes.`,
      });
    }
    chunks.push(chunk);
  }
  if (part.file.truncated) {
    throw new AppError("request_too_large", { message: `The uploaded file exceeds the plan's upload size limit of ${limit} bytes.` });
  }
  return Buffer.concat(chunks, total);
}

/**
 * Reads the multipart form: streams the file (413 request_too_large past `maxUploadBytes`, without reading on),
 * then checks every field with its own `param`. Field checks come before the model is looked up (decisions.md:
 * schema 400 before 404).
 */
export async function readTranscriptionForm(request: FastifyRequest, maxUploadBytes: number): Promise<TranscriptionInput> {
  if (!request.isMultipart()) throw bad("file", "The request must be multipart/form-data with a 'file' field.");
  const fields = new Map<string, string[]>();
  let file: TranscriptionInput["file"] | null = null;
  try {
    const parts = request.parts({
      limits: { fileSize: maxUploadBytes, files: 1, fields: 32, fieldSize: maxFieldBytes, parts: 40 },
    });
    for await (const part of parts as AsyncIterable<Multipart>) {
      if (part.type === "file") {
        if (part.fieldname !== "file") {
          await drain(part);
          throw bad(part.fieldname, `Unexpected file field '${part.fieldname}'; send the audio in the field 'file'.`);
        }
        const bytes = await readFile(part, maxUploadBytes);
        file = { bytes, filename: part.filename || null, mimetype: part.mimetype || null };
      } else {
        if (part.valueTruncated) throw bad(part.fieldname, `The field '${part.fieldname}' is too long.`);
        const list = fields.get(part.fieldname) ?? [];
        list.push(String(part.value));
        fields.set(part.fieldname, list);
      }
    }
  } catch (err) {
    throw uploadError(err);
  }
  return checkFields(fields, file);
}

async function drain(part: MultipartFile): Promise<void> {
  for await (const _ of part.file) void _;
}

function one(fields: Map<string, string[]>, name: string): string | null {
  const values = fields.get(name);
  if (!values) return null;
  if (values.length > 1) throw bad(name, `The field '${name}' is given more than once.`);
  return values[0];
}

/** The field checks, in a fixed order: model, file, response_format, temperature, language, granularities. */
export function checkFields(fields: Map<string, string[]>, file: TranscriptionInput["file"] | null): TranscriptionInput {
  const model = one(fields, "model");
  if (model === null || model.trim() === "") throw bad("model", "The field 'model' is required.");
  if (!file) throw bad("file", "The field 'file' is required: upload the audio as a file part named 'file'.");
  if (file.bytes.length === 0) throw bad("file", "The uploaded file is empty.");

  const format = one(fields, "response_format") ?? "json";
  if (format === "srt" || format === "vtt") {
    throw bad("response_format", `response_format '${format}' is not supported; use json, text or verbose_json.`);
  }
  if (!formats.includes(format)) throw bad("response_format", `response_format must be json, text or verbose_json, not '${format}'.`);

  const rawTemperature = one(fields, "temperature");
  let temperature = 0;
  if (rawTemperature !== null && rawTemperature.trim() !== "") {
    temperature = Number(rawTemperature);
    if (!Number.isFinite(temperature)) throw bad("temperature", "temperature must be a number between 0 and 1.");
    if (temperature < 0 || temperature > 1) throw bad("temperature", `temperature must be between 0 and 1, not ${rawTemperature}.`);
  }

  const rawLanguage = one(fields, "language");
  let language: string | null = null;
  if (rawLanguage !== null && rawLanguage.trim() !== "") {
    language = rawLanguage.trim().toLowerCase();
    if (!whisperLanguages.has(language)) {
      throw bad("language", `language must be an ISO-639-1 code such as 'en' or 'de'; '${rawLanguage}' is not a supported language.`);
    }
  }

  for (const name of ["timestamp_granularities[]", "timestamp_granularities"]) {
    for (const value of fields.get(name) ?? []) {
      if (value === "word") throw bad("timestamp_granularities", "Word-level timestamps are not supported; only segment timestamps are.");
      if (value !== "segment") throw bad("timestamp_granularities", `timestamp_granularities may only contain 'segment', not '${value}'.`);
    }
  }
  const stream = one(fields, "stream");
  if (stream !== null && stream !== "false") throw bad("stream", "Streaming transcriptions are not supported.");

  const prompt = one(fields, "prompt");
  return {
    file,
    model,
    language,
    prompt: prompt && prompt.trim() ? prompt : null,
    responseFormat: format as TranscriptionFormat,
    temperature,
  };
}
