import { FormatRegistry, Type, type Static, type TSchema } from "@sinclair/typebox";
import { whisperLanguages } from "./languages.ts";

// OpenAPI's marker for file parts; the form reader stands a placeholder string in for the streamed file.
if (!FormatRegistry.Has("binary")) FormatRegistry.Set("binary", () => true);

/** §4.4 response formats: the one list (validation, types, OpenAPI, the service's switch). */
export const transcriptionFormats = ["json", "text", "verbose_json"] as const;
export type TranscriptionFormat = (typeof transcriptionFormats)[number];

/**
 * §4.4 POST /v1/audio/transcriptions, multipart/form-data. transcription.form.ts streams the parts and checks the
 * fields against this schema (properties in the order they are checked; text fields arrive as strings and are
 * converted first); it also documents the form in /v1/openapi.json.
 */
export const TranscriptionRequestForm = Type.Object(
  {
    model: Type.String({ minLength: 1, pattern: "\\S" }),
    file: Type.String({ format: "binary", description: "wav, mp3, m4a, webm, ogg or flac" }),
    response_format: Type.Optional(Type.Union(transcriptionFormats.map((f) => Type.Literal(f)), { default: "json" })),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1, default: 0 })),
    language: Type.Optional(Type.Union([...whisperLanguages.keys()].map((code) => Type.Literal(code)), { description: "ISO-639-1 code; detected when omitted", "x-expected": "an ISO-639-1 code whisper knows, such as en or de" })),
    timestamp_granularities: Type.Optional(Type.Array(Type.Literal("segment"), { description: "Only segment timestamps exist" })),
    stream: Type.Optional(Type.Literal(false, { description: "Streaming transcriptions are not supported" })),
    prompt: Type.Optional(Type.String({ description: "Text whisper sees as the previous transcript" })),
  },
  { additionalProperties: true },
);
export type TranscriptionRequestForm = Static<typeof TranscriptionRequestForm>;

/** A form that passed the field checks; the file is still undecoded bytes. */
export interface TranscriptionInput {
  file: { bytes: Uint8Array; filename: string | null; mimetype: string | null };
  model: string;
  language: string | null;
  prompt: string | null;
  responseFormat: TranscriptionFormat;
  temperature: number;
}

// additionalProperties false on both answers, so serialising their union picks the right one.
export const TranscriptionJson = Type.Object({ text: Type.String() }, { $id: "TranscriptionJson", additionalProperties: false });
export type TranscriptionJson = Static<typeof TranscriptionJson>;

export const TranscriptionSegment = Type.Object({
  id: Type.Integer(),
  start: Type.Number(),
  end: Type.Number(),
  text: Type.String(),
});
export type TranscriptionSegment = Static<typeof TranscriptionSegment>;

export const TranscriptionVerbose = Type.Object(
  {
    task: Type.Literal("transcribe"),
    language: Type.String({ description: "English name in lower case, e.g. english" }),
    duration: Type.Number(),
    text: Type.String(),
    segments: Type.Array(TranscriptionSegment),
  },
  { $id: "TranscriptionVerbose", additionalProperties: false },
);
export type TranscriptionVerbose = Static<typeof TranscriptionVerbose>;

export type TranscriptionResponse =
  | { format: "json"; body: TranscriptionJson }
  | { format: "text"; body: string }
  | { format: "verbose_json"; body: TranscriptionVerbose };

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const transcriptionSchemas: TSchema[] = [TranscriptionJson, TranscriptionVerbose];
