// Issue 47: server.maxRequestsPerConnection. Behind a TCP balancer, a busy client's keep-alive connections stay on the
// replica that took them; after the other replica restarts, a bound on requests per connection spreads them again.
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { startServer, type TestServer } from "../harness/server.ts";
import { RawConnection, head } from "./helpers/raw-http.ts";

const servers: TestServer[] = [];
after(async () => {
  for (const srv of servers) await srv.close();
});

/** Sends `count` authenticated GET /v1/models on one connection; each answer's Connection header, and whether the server closed it after. */
async function onOneConnection(raw: Record<string, unknown>, count: number): Promise<{ connection: (string | undefined)[]; closed: boolean }> {
  const srv = await startServer({ models: [], ...raw });
  servers.push(srv);
  const { key } = await srv.createKey();
  const conn = await RawConnection.open(srv.origin, srv.ca);
  try {
    const connection: (string | undefined)[] = [];
    for (let i = 0; i < count; i++) {
      await conn.write(head("GET /v1/models HTTP/1.1", { host: "localhost", authorization: `Bearer ${key}` }));
      const res = await conn.read(5000);
      assert.equal(res.status, 200, res.body);
      connection.push(res.headers.connection);
    }
    return { connection, closed: await conn.closedWithin(1000) };
  } finally {
    conn.end();
  }
}

test("issue 47 server.maxRequestsPerConnection: 3: the third answer on a keep-alive connection says Connection: close, and the server closes it", async () => {
  assert.deepEqual(await onOneConnection({ server: { maxRequestsPerConnection: 3 } }, 3), { connection: ["keep-alive", "keep-alive", "close"], closed: true });
});

test("issue 47 without the option a keep-alive connection carries any number of requests", async () => {
  assert.deepEqual(await onOneConnection({}, 5), { connection: Array(5).fill("keep-alive"), closed: false });
});
