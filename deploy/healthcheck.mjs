// The container's HEALTHCHECK: GET /healthz over HTTPS on loopback, verifying the server's certificate (the one
// given in MODELGATE_TLS_CERT, or the one generated in the data dir, whose names include 127.0.0.1; for a
// certificate of another name, set MODELGATE_HEALTH_SERVERNAME). Exit 0 when it answers 200.
import { readFileSync } from "node:fs";
import { get } from "node:https";
import path from "node:path";

const cert = process.env.MODELGATE_TLS_CERT || path.join(process.env.MODELGATE_DATA_DIR || "/data", "tls/cert.pem");
const port = Number(process.env.MODELGATE_HEALTH_PORT || process.env.MODELGATE_PORT || 8443);
let ca;
try {
  ca = readFileSync(cert);
} catch {
  process.exit(1);
}
const servername = process.env.MODELGATE_HEALTH_SERVERNAME || undefined;
get({ host: "127.0.0.1", port, path: "/healthz", ca, servername, timeout: 2500 }, (res) => {
  res.resume();
  process.exit(res.statusCode === 200 ? 0 : 1);
})
  .on("error", () => process.exit(1))
  .on("timeout", () => process.exit(1));
