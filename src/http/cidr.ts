import { isIP } from "node:net";

/** "::ffff:10.0.0.1" -> "10.0.0.1", so IPv4 peers on dual-stack sockets match IPv4 CIDRs. */
export function normalizeIp(ip: string): string {
  const lower = ip.toLowerCase();
  return lower.startsWith("::ffff:") && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower;
}

function ipv4ToBigInt(ip: string): bigint {
  return ip.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function ipv6ToBigInt(ip: string): bigint {
  let text = ip;
  const v4Tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4Tail) {
    const v4 = ipv4ToBigInt(v4Tail[1]);
    text = `${text.slice(0, -v4Tail[1].length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split("::");
  const headParts = head ? head.split(":") : [];
  const tailParts = tail !== undefined && tail !== "" ? tail.split(":") : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = tail === undefined ? headParts : [...headParts, ...Array(missing).fill("0"), ...tailParts];
  return parts.reduce((acc, part) => (acc << 16n) | BigInt(parseInt(part || "0", 16)), 0n);
}

export interface Cidr {
  version: 4 | 6;
  base: bigint;
  prefix: number;
}

/** Parses "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128). Throws on bad input. */
export function parseCidr(text: string): Cidr {
  const [addr, prefixText] = text.trim().split("/");
  const ip = normalizeIp(addr);
  const version = isIP(ip);
  if (version !== 4 && version !== 6) throw new Error(`invalid CIDR "${text}"`);
  const bits = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits || (prefixText !== undefined && !/^\d+$/.test(prefixText))) {
    throw new Error(`invalid CIDR prefix in "${text}"`);
  }
  const value = version === 4 ? ipv4ToBigInt(ip) : ipv6ToBigInt(ip);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  return { version, base: value & mask, prefix };
}

export function cidrContains(cidr: Cidr, ipText: string): boolean {
  const ip = normalizeIp(ipText);
  const version = isIP(ip);
  if (version !== cidr.version) return false;
  const bits = version === 4 ? 32 : 128;
  const value = version === 4 ? ipv4ToBigInt(ip) : ipv6ToBigInt(ip);
  const mask = cidr.prefix === 0 ? 0n : ((1n << BigInt(cidr.prefix)) - 1n) << BigInt(bits - cidr.prefix);
  return (value & mask) === cidr.base;
}

export function anyCidrContains(cidrs: Cidr[], ip: string): boolean {
  return cidrs.some((c) => cidrContains(c, ip));
}
