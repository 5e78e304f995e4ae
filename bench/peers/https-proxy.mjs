// The minimal HTTPS→HTTP reverse proxy a gateway is compared with: TLS termination, keep-alive connections to the
// target, bodies piped both ways, nothing else. `node https-proxy.mjs CERT KEY TARGET_PORT`; prints its port.
import { readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { createServer } from "node:https";

const [cert, key, targetPort] = process.argv.slice(2);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (req, res) => {
  const upstream = request({ host: "127.0.0.1", port: Number(targetPort), method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  upstream.on("error", () => res.writeHead(502).end());
  req.pipe(upstream);
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
