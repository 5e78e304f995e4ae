import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync, renameSync } from "node:fs";
import path from "node:path";

export interface TlsMaterial {
  cert: string;
  key: string;
  certPath: string;
  /** SHA-256 fingerprint of the certificate, colon-separated hex. */
  fingerprint: string;
  generated: boolean;
  /** The SHA-256 fingerprint of a generated certificate this start replaced because it was a CA, else null. */
  replacedCa: string | null;
}

const generatedName = "modelgate.local";

function fingerprintOf(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

function writeAtomic(file: string, content: string, mode: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode });
  renameSync(tmp, file);
}

/**
 * A certificate earlier versions generated: self-signed `CN=modelgate.local` marked as a CA. A client that trusts
 * it would accept any name signed with its key, which sits in the data dir; it is replaced by a leaf.
 */
function isGeneratedCa(certPem: string): boolean {
  const cert = new X509Certificate(certPem);
  return cert.ca && cert.subject === `CN=${generatedName}` && cert.checkIssued(cert);
}

/**
 * A self-signed leaf: not a CA (it cannot vouch for any other certificate), for TLS servers only. Clients still
 * trust it directly as their anchor (NODE_EXTRA_CA_CERTS, curl --cacert, undici's `ca`). Key usage is
 * digitalSignature alone: keyEncipherment is RSA key transport, which an EC key cannot do (RFC 8813 forbids it).
 */
async function generateLeaf(): Promise<{ cert: string; key: string }> {
  const notAfter = new Date();
  notAfter.setFullYear(notAfter.getFullYear() + 5);
  // Loaded here, at the first start only: selfsigned and its X.509 library are some 200 modules.
  const { generate } = await import("selfsigned");
  const pems = await generate([{ name: "commonName", value: generatedName }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    notAfterDate: notAfter,
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }, { type: 7, ip: "::1" }] },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/**
 * The configured certificate (used as it is, whatever it is), or a self-signed one in <dataDir>/tls (generated on
 * first start with SANs localhost, 127.0.0.1 and ::1, reused after), so the service is HTTPS-only from its first
 * run. A CA certificate generated there by an earlier version is replaced, once, by a leaf.
 */
export async function loadOrCreateTls(configured: { cert: string; key: string } | null, dataDir: string): Promise<TlsMaterial> {
  if (configured) {
    const cert = readFileSync(configured.cert, "utf8");
    return { cert, key: readFileSync(configured.key, "utf8"), certPath: configured.cert, fingerprint: fingerprintOf(cert), generated: false, replacedCa: null };
  }
  const dir = path.join(dataDir, "tls");
  const certPath = path.join(dir, "cert.pem");
  const keyPath = path.join(dir, "key.pem");
  let replacedCa: string | null = null;
  if (existsSync(certPath) && existsSync(keyPath)) {
    const cert = readFileSync(certPath, "utf8");
    if (!isGeneratedCa(cert)) {
      return { cert, key: readFileSync(keyPath, "utf8"), certPath, fingerprint: fingerprintOf(cert), generated: false, replacedCa: null };
    }
    replacedCa = fingerprintOf(cert);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pems = await generateLeaf();
  writeAtomic(keyPath, pems.key, 0o600);
  writeAtomic(certPath, pems.cert, 0o644);
  return { cert: pems.cert, key: pems.key, certPath, fingerprint: fingerprintOf(pems.cert), generated: true, replacedCa };
}

