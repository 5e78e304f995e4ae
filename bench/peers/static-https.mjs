// Raw Node HTTPS: the floor a gateway's per-request cost is compared with. Answers every request with the same
// JSON body, with the same certificate. `node static-https.mjs CERT KEY BODY_FILE`; prints its port.
import { readFileSync } from "node:fs";
import { createServer } from "node:https";

const [cert, key, bodyFile] = process.argv.slice(2);
const body = readFileSync(bodyFile);
const server = createServer({ cert: readFileSync(cert), key: readFileSync(key) }, (_req, res) => {
  res.writeHead(200, { "content-type": "application/json; charset=utf-8", "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
