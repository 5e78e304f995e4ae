// Issue 29.14: the generated certificate is a leaf that clients trust directly, and an old generated CA is replaced.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import https from "node:https";
import path from "node:path";
import { promisify } from "node:util";
import { BasicConstraintsExtension, ExtendedKeyUsage, ExtendedKeyUsageExtension, KeyUsageFlags, KeyUsagesExtension, X509Certificate } from "@peculiar/x509";
import { generate } from "selfsigned";
import { Agent } from "undici";
import { loadOrCreateTls } from "../src/http/tls.ts";
import { tempDir } from "../harness/server.ts";

const run = promisify(execFile);

test("issue 29.14 the generated certificate is a leaf: cA false, digitalSignature only, serverAuth", async () => {
  const tls = await loadOrCreateTls(null, tempDir());
  const cert = new X509Certificate(tls.cert);
  const basic = cert.getExtension(BasicConstraintsExtension);
  assert.ok(basic, "basicConstraints present");
  assert.equal(basic.ca, false);
  assert.equal(basic.critical, true);
  const usage = cert.getExtension(KeyUsagesExtension);
  assert.ok(usage, "keyUsage present");
  assert.equal(usage.usages, KeyUsageFlags.digitalSignature, "no keyCertSign, no cRLSign");
  assert.deepEqual([...(cert.getExtension(ExtendedKeyUsageExtension)?.usages ?? [])], [ExtendedKeyUsage.serverAuth]);
});

test("issue 29.14 clients trust the generated leaf as their anchor: undici ca, NODE_EXTRA_CA_CERTS, curl --cacert", async () => {
  const tls = await loadOrCreateTls(null, tempDir());
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (_req, res) => res.end("trusted"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  try {
    for (const host of ["127.0.0.1", "localhost"]) {
      const url = `https://${host}:${port}/`;
      const agent = new Agent({ connect: { ca: tls.cert } });
      const res = await fetch(url, { dispatcher: agent } as RequestInit);
      assert.equal(await res.text(), "trusted", `undici ${host}`);
      await agent.close();
      const node = await run(process.execPath, ["-e", `fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => process.stdout.write(t))`], {
        env: { ...process.env, NODE_EXTRA_CA_CERTS: tls.certPath },
      });
      assert.equal(node.stdout, "trusted", `NODE_EXTRA_CA_CERTS ${host}`);
      const curl = await run("curl", ["-sS", "--cacert", tls.certPath, url]);
      assert.equal(curl.stdout, "trusted", `curl ${host}`);
    }
  } finally {
    server.close();
  }
});

/** A certificate as versions before issue 29 generated it: self-signed, CN=modelgate.local, a CA. */
async function oldGeneratedCa(): Promise<{ cert: string; key: string }> {
  const pems = await generate([{ name: "commonName", value: "modelgate.local" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }] },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

test("issue 29.14 a CA certificate an earlier version generated is replaced by a leaf once; a configured CA certificate is used as it is", async () => {
  const dataDir = tempDir();
  mkdirSync(path.join(dataDir, "tls"));
  const old = await oldGeneratedCa();
  writeFileSync(path.join(dataDir, "tls/cert.pem"), old.cert);
  writeFileSync(path.join(dataDir, "tls/key.pem"), old.key);
  const oldFingerprint = new (await import("node:crypto")).X509Certificate(old.cert).fingerprint256;

  const replaced = await loadOrCreateTls(null, dataDir);
  assert.equal(replaced.generated, true);
  assert.equal(replaced.replacedCa, oldFingerprint);
  assert.notEqual(replaced.fingerprint, oldFingerprint);
  assert.equal(new X509Certificate(readFileSync(path.join(dataDir, "tls/cert.pem"), "utf8")).getExtension(BasicConstraintsExtension)?.ca, false);
  assert.notEqual(readFileSync(path.join(dataDir, "tls/key.pem"), "utf8"), old.key, "the CA's key is gone from the data dir");

  const again = await loadOrCreateTls(null, dataDir);
  assert.deepEqual([again.generated, again.replacedCa, again.fingerprint], [false, null, replaced.fingerprint], "the leaf is kept after");

  const operatorDir = tempDir();
  writeFileSync(path.join(operatorDir, "cert.pem"), old.cert);
  writeFileSync(path.join(operatorDir, "key.pem"), old.key);
  const configured = await loadOrCreateTls({ cert: path.join(operatorDir, "cert.pem"), key: path.join(operatorDir, "key.pem") }, tempDir());
  assert.deepEqual([configured.cert, configured.generated, configured.replacedCa], [old.cert, false, null]);
  assert.equal(readFileSync(path.join(operatorDir, "cert.pem"), "utf8"), old.cert, "a configured certificate is never rewritten");
});
