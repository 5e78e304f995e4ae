import { Type, type Static, type TSchema } from "@sinclair/typebox";

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** The OpenAI file object. */
export const FileObject = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("file"),
    bytes: Type.Integer(),
    created_at: Type.Integer({ description: "Unix seconds" }),
    filename: Type.String(),
    purpose: Type.Union([Type.Literal("batch"), Type.Literal("batch_output")]),
    status: Type.Literal("processed"),
    expires_at: Nullable(Type.Integer({ description: "Unix seconds; after it the file is gone (null: kept until deleted)" })),
    status_details: Type.Null(),
  },
  { $id: "FileObject" },
);
export type FileObject = Static<typeof FileObject>;

/** A page of an OpenAI cursor list (`after` is the last id of the previous page). */
const ListPage = <T extends TSchema>(item: T, $id: string) =>
  Type.Object(
    { object: Type.Literal("list"), data: Type.Array(Type.Ref(item)), first_id: Nullable(Type.String()), last_id: Nullable(Type.String()), has_more: Type.Boolean() },
    { $id },
  );

export const FileList = ListPage(FileObject, "FileList");

export const FileDeleted = Type.Object({ id: Type.String(), object: Type.Literal("file"), deleted: Type.Boolean() }, { $id: "FileDeleted" });

export const FileListQuery = Type.Object(
  {
    purpose: Type.Optional(Type.String()),
    limit: Type.Optional(Type.String({ pattern: "^[1-9][0-9]{0,4}$", description: "1 to 10000 (default 10000)" })),
    after: Type.Optional(Type.String()),
    order: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
  },
  { additionalProperties: false },
);
export type FileListQuery = Static<typeof FileListQuery>;

/** `expires_after` of a file (OpenAI's bounds: 1 hour to 30 days after its creation). */
export const expiresAfterSeconds = { minimum: 3600, maximum: 2_592_000 } as const;

/** The fields of POST /v1/files (multipart): read part by part by file-upload.ts. */
export const FileUploadForm = Type.Object(
  {
    purpose: Type.Literal("batch", { description: "Only `batch` is accepted" }),
    file: Type.String({ format: "binary", description: "JSONL, one request per line" }),
    "expires_after[anchor]": Type.Optional(Type.Literal("created_at", { description: "With expires_after[seconds]: when the file expires" })),
    "expires_after[seconds]": Type.Optional(Type.Integer({ ...expiresAfterSeconds, description: "Seconds after its creation (default batches.fileExpiry)" })),
  },
  { additionalProperties: false },
);

export const BatchEndpoint = Type.Union([Type.Literal("/v1/chat/completions"), Type.Literal("/v1/embeddings")]);
export type BatchEndpoint = Static<typeof BatchEndpoint>;

export const BatchStatus = Type.Union(
  ["validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"].map((s) => Type.Literal(s)),
);

const Metadata = Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 512 }), { maxProperties: 16 });

export const CreateBatchRequest = Type.Object(
  {
    input_file_id: Type.String({ minLength: 1 }),
    endpoint: BatchEndpoint,
    completion_window: Type.Literal("24h"),
    metadata: Type.Optional(Nullable(Metadata)),
    /** When the output and error files expire (default batches.outputExpiry). */
    output_expires_after: Type.Optional(
      Type.Object({ anchor: Type.Literal("created_at"), seconds: Type.Integer(expiresAfterSeconds) }, { additionalProperties: false }),
    ),
  },
  { $id: "CreateBatchRequest", additionalProperties: false },
);
export type CreateBatchRequest = Static<typeof CreateBatchRequest>;

/** The OpenAI batch object. */
export const BatchObject = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("batch"),
    endpoint: BatchEndpoint,
    errors: Nullable(
      Type.Object({
        object: Type.Literal("list"),
        data: Type.Array(Type.Object({ code: Type.String(), message: Type.String(), param: Nullable(Type.String()), line: Nullable(Type.Integer({ description: "1-based line of the input file" })) })),
      }),
    ),
    input_file_id: Type.String(),
    completion_window: Type.String(),
    status: BatchStatus,
    output_file_id: Nullable(Type.String()),
    error_file_id: Nullable(Type.String()),
    created_at: Type.Integer(),
    in_progress_at: Nullable(Type.Integer()),
    expires_at: Nullable(Type.Integer()),
    finalizing_at: Nullable(Type.Integer()),
    completed_at: Nullable(Type.Integer()),
    failed_at: Nullable(Type.Integer()),
    expired_at: Nullable(Type.Integer()),
    cancelling_at: Nullable(Type.Integer()),
    cancelled_at: Nullable(Type.Integer()),
    request_counts: Type.Object({ total: Type.Integer(), completed: Type.Integer(), failed: Type.Integer() }),
    metadata: Nullable(Type.Record(Type.String(), Type.String())),
  },
  { $id: "BatchObject" },
);
export type BatchObject = Static<typeof BatchObject>;

export const BatchList = ListPage(BatchObject, "BatchList");

export const BatchListQuery = Type.Object(
  { limit: Type.Optional(Type.String({ pattern: "^([1-9][0-9]?|100)$", description: "1 to 100 (default 20)" })), after: Type.Optional(Type.String()) },
  { additionalProperties: false },
);
export type BatchListQuery = Static<typeof BatchListQuery>;

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const batchesSchemas: TSchema[] = [FileObject, FileList, FileDeleted, CreateBatchRequest, BatchObject, BatchList];
