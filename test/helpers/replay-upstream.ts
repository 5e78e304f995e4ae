import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for the inference servers that cannot run here (vLLM, SGLang, TGI, Ollama): it replays the response
 * and error shapes their documentation and sources give, one scripted answer per path. Only for the mapping
 * tests; everything that can run for real (Modelgate nodes, llama-server) does.
 */
export interface Replay {
  url: string;
  /** What each request asked, in order: path and parsed JSON body (or the raw text). */
  requests: { path: string; body: unknown }[];
  /** Sets the answer for a path (`/v1/chat/completions`). */
  on(path: string, answer: (req: IncomingMessage, res: ServerResponse, body: string) => void): void;
  close(): Promise<void>;
}

export async function startReplay(): Promise<Replay> {
  const answers = new Map<string, (req: IncomingMessage, res: ServerResponse, body: string) => void>();
  const requests: Replay["requests"] = [];
  const sockets = new Set<import("node:net").Socket>();
  const server: Server = createServer((req, res) => {
    let body = "";
    req.setEncoding("latin1").on("data", (d: string) => (body += d));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0];
      let parsed: unknown = body;
      try {
        parsed = JSON.parse(body);
      } catch {
        // multipart or empty: kept as text
      }
      requests.push({ path, body: parsed });
      const answer = answers.get(path);
      if (!answer) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ detail: "Not Found" }));
        return;
      }
      answer(req, res, body);
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    on: (path, answer) => answers.set(path, answer),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A JSON answer with a status and extra headers. */
export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
  };

/** An event stream of the given `data:` payloads (objects are JSON-encoded), ending with `[DONE]` unless told not to. */
export const sse =
  (payloads: unknown[], { done = true } = {}) =>
  (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (const p of payloads) res.write(`data: ${typeof p === "string" ? p : JSON.stringify(p)}\n\n`);
    if (done) res.write("data: [DONE]\n\n");
    res.end();
  };
