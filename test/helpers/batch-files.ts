import { ReadableStream } from "node:stream/web";
import type OpenAI from "openai";
import { toFile } from "openai";
import type { TestServer } from "../../harness/server.ts";
import { waitFor } from "./wait-for.ts";

/** `lines` chat lines of about `lineBytes` each; the padding is in `user`, which the service ignores, so lines run short. */
export function input(lines: number, lineBytes: number, options: { model?: string; maxTokens?: number } = {}): Buffer {
  const head = (i: number) =>
    `{"custom_id":"r${i}","method":"POST","url":"/v1/chat/completions","body":{"model":"${options.model ?? "m"}","max_tokens":${options.maxTokens ?? 4},"messages":[{"role":"user","content":"Once upon a time"}],"user":"`;
  const tail = `"}}\n`;
  const out = Buffer.alloc(lines * lineBytes);
  for (let i = 0, start = 0; i < lines; i++, start += lineBytes) {
    const end = start + lineBytes - tail.length;
    out.fill(0x78, start + out.write(head(i), start), end);
    out.write(tail, end);
  }
  return out;
}

/**
 * POST /v1/files as a multipart body sent in 64 KiB pieces, as a client sending from disk does (one 100 MiB write
 * would hold this process's event loop in TLS encryption: the client's cost, not the server's). `hold` pauses the
 * body once `after` bytes of the file are sent, until `until` resolves.
 */
export async function streamUpload(srv: TestServer, key: string, file: Buffer, fields: Record<string, string> = { purpose: "batch" }, hold?: { after: number; until: Promise<void> }) {
  const boundary = `----modelgate${Date.now()}`;
  const head = Buffer.from(
    Object.entries(fields)
      .map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`)
      .join("") + `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="input.jsonl"\r\ncontent-type: application/jsonl\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  async function* pieces() {
    yield head;
    for (let at = 0; at < file.length; at += 65_536) {
      if (hold && at >= hold.after && at - 65_536 < hold.after) await hold.until;
      yield file.subarray(at, at + 65_536);
    }
    yield tail;
  }
  const response = await srv.fetch(`${srv.baseURL}/files`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": String(head.length + file.length + tail.length) },
    body: ReadableStream.from(pieces()),
    duplex: "half",
  } as RequestInit);
  return { status: response.status, body: (await response.json()) as any };
}

export const upload = async (client: OpenAI, content: Buffer | string, extra: Record<string, unknown> = {}) =>
  client.files.create({ file: await toFile(Buffer.from(content), "input.jsonl"), purpose: "batch", ...extra });

export const chatBatch = (client: OpenAI, fileId: string, extra: Record<string, unknown> = {}) =>
  client.batches.create({ input_file_id: fileId, endpoint: "/v1/chat/completions", completion_window: "24h", ...extra });

export const finished = (client: OpenAI, id: string) =>
  waitFor(() => client.batches.retrieve(id), (b) => ["completed", "failed", "expired", "cancelled"].includes(b.status), `batch ${id} to end`, 60_000, 100);
