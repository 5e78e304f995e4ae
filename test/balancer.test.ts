import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { Balancer } from "../harness/balancer.ts";
import { until } from "./helpers/wait-for.ts";

/** A backend that answers each connection with its name and closes it. */
async function backend(name: string, port = 0): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer((socket) => socket.on("error", () => {}).end(name));
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return { server, port: (server.address() as net.AddressInfo).port };
}

function ask(port: number): Promise<string> {
  return new Promise((resolve) => {
    let answer = "";
    const socket = net.connect(port, "127.0.0.1");
    socket.setEncoding("utf8").on("data", (d: string) => (answer += d));
    socket.on("close", () => resolve(answer || "nothing"));
    socket.on("error", () => {});
  });
}

/**
 * Issue 47: the soak's balancer kept sending connections to a replica killed with -9. A replica that refuses a
 * connection is taken out at once (that connection goes to the other), and comes back once it accepts again.
 */
test("issue 47 the balancer sends no connection to a dead replica, and takes it back once it listens again", async () => {
  const a = await backend("a");
  const b = await backend("b");
  const balancer = await Balancer.start([a.port, b.port], 100);
  try {
    const answers = async (n: number) => Promise.all(Array.from({ length: n }, () => ask(balancer.port)));
    assert.deepEqual(new Set(await answers(4)), new Set(["a", "b"]));
    await new Promise<void>((resolve) => b.server.close(() => resolve()));
    assert.deepEqual(new Set(await answers(10)), new Set(["a"]), "every connection is answered, by the live replica");
    const back = await backend("b", b.port);
    await until(() => balancer.state()[1] === true, "the replica probed back in", 2_000, 20);
    assert.deepEqual(new Set(await answers(4)), new Set(["a", "b"]));
    back.server.close();
  } finally {
    await balancer.close();
    a.server.close();
  }
});
