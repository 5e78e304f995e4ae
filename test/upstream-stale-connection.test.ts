import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { UpstreamClient } from "../src/engines/upstream/upstream-client.ts";

/*
 * A kept-alive connection the upstream closes as our next request goes out on it (llama-server closes idle ones after
 * 5 s): the request goes once more on a new connection instead of failing as "could not be reached".
 */
test("a request whose kept-alive connection the upstream closes without answering goes again on a new connection", async () => {
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = ++connections;
    let answered = 0;
    let pending = "";
    socket.setEncoding("latin1").on("data", (data: string) => {
      pending += data;
      for (;;) {
        const headEnd = pending.indexOf("\r\n\r\n");
        if (headEnd < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, headEnd))?.[1] ?? 0);
        if (pending.length < headEnd + 4 + length) return;
        pending = pending.slice(headEnd + 4 + length);
        // The second request on the first connection: closed unanswered, as a keep-alive timeout running out would.
        if (connection === 1 && answered === 1) return void socket.resetAndDestroy();
        answered++;
        const body = JSON.stringify({ connection });
        socket.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nkeep-alive: timeout=60\r\n\r\n${body}`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const client = new UpstreamClient({ url: `http://127.0.0.1:${port}/v1`, apiKey: null, model: "m", ca: null }, { connectMs: 1000, firstByteMs: 5000, idleMs: 5000, totalMs: 10_000 }, false);
  try {
    const signal = new AbortController().signal;
    assert.deepEqual(await client.json({ path: "/first", json: {}, signal }), { connection: 1 });
    // Idle for a moment, so that the pool sends the next request on the connection it keeps.
    await sleep(100);
    assert.deepEqual(await client.json({ path: "/second", json: {}, signal }), { connection: 2 }, "answered on a new connection");
    assert.equal(connections, 2);
  } finally {
    await client.close();
    server.close();
  }
});
