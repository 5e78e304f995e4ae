import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import path from "node:path";
import { generate } from "selfsigned";

export interface TlsMaterial {
  cert: string;
  key: string;
  certPath: string;
  /** SHA-256 fingerprint of the certificate, colon-separated hex. */
  fingerprint: string;
  generated: boolean;
}

function fingerprintOf(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

function writeAtomic(file: string, content: string, mode: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode });
  renameSync(tmp, file);
}

/**
 * The configured certificate, or a self-signed one in <dataDir>/tls (generated on first start with SANs
 * localhost, 127.0.0.1 and ::1, reused after), so the service is HTTPS-only from its first run.
 */
export async function loadOrCreateTls(configured: { cert: string; key: string } | null, dataDir: string): Promise<TlsMaterial> {
  if (configured) {
    const cert = readFileSync(configured.cert, "utf8");
    return { cert, key: readFileSync(configured.key, "utf8"), certPath: configured.cert, fingerprint: fingerprintOf(cert), generated: false };
  }
  const dir = path.join(dataDir, "tls");
  const certPath = path.join(dir, "cert.pem");
  const keyPath = path.join(dir, "key.pem");
  if (existsSync(certPath) && existsSync(keyPath)) {
    const cert = readFileSync(certPath, "utf8");
    return { cert, key: readFileSync(keyPath, "utf8"), certPath, fingerprint: fingerprintOf(cert), generated: false };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 5);
  const pems = await generate([{ name: "commonName", value: "modelgate.local" }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate: notAfter,
    extensions: [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", digitalSignature: true, keyCertSign: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }, { type: 7, ip: "::1" }] },
    ],
  });
  writeAtomic(keyPath, pems.private, 0o600);
  writeAtomic(certPath, pems.cert, 0o644);
  return { cert: pems.cert, key: pems.private, certPath, fingerprint: fingerprintOf(pems.cert), generated: true };
}

