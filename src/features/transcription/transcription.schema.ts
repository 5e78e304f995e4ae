import { Type, type Static } from "@sinclair/typebox";

/**
 * §4.4 POST /v1/audio/transcriptions. The request is multipart/form-data, so it is checked field by field in
 * transcription.form.ts rather than by ajv; these schemas describe it and the responses (§2.6) for OpenAPI.
 */
export const TranscriptionRequestForm = Type.Object(
  {
    file: Type.String({ format: "binary", description: "wav, mp3, m4a, webm, ogg or flac" }),
    model: Type.String({ minLength: 1 }),
    language: Type.Optional(Type.String({ description: "ISO-639-1 code; detected when omitted" })),
    prompt: Type.Optional(Type.String({ description: "Text whisper sees as the previous transcript" })),
    response_format: Type.Optional(Type.Union([Type.Literal("json"), Type.Literal("text"), Type.Literal("verbose_json")])),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1, default: 0 })),
  },
  { additionalProperties: true },
);
export type TranscriptionRequestForm = Static<typeof TranscriptionRequestForm>;

export type TranscriptionFormat = "json" | "text" | "verbose_json";

/** A form that passed the field checks; the file is still undecoded bytes. */
export interface TranscriptionInput {
  file: { bytes: Uint8Array; filename: string | null; mimetype: string | null };
  model: string;
  language: string | null;
  prompt: string | null;
  responseFormat: TranscriptionFormat;
  temperature: number;
}

export const TranscriptionJson = Type.Object({ text: Type.String() });
export type TranscriptionJson = Static<typeof TranscriptionJson>;

export const TranscriptionSegment = Type.Object({
  id: Type.Integer(),
  start: Type.Number(),
  end: Type.Number(),
  text: Type.String(),
});
export type TranscriptionSegment = Static<typeof TranscriptionSegment>;

export const TranscriptionVerbose = Type.Object({
  task: Type.Literal("transcribe"),
  language: Type.String({ description: "English name in lower case, e.g. english" }),
  duration: Type.Number(),
  text: Type.String(),
  segments: Type.Array(TranscriptionSegment),
});
export type TranscriptionVerbose = Static<typeof TranscriptionVerbose>;

export type TranscriptionResponse =
  | { format: "json"; body: TranscriptionJson }
  | { format: "text"; body: string }
  | { format: "verbose_json"; body: TranscriptionVerbose };
