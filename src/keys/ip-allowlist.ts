import { BlockList, isIP } from "node:net";

export interface Cidr {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128). Returns null when invalid. */
export function parseCidr(text: string): Cidr | null {
  const [address, prefixText, extra] = text.trim().split("/");
  if (extra !== undefined || !address) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^[0-9]{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return null;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

/** "::ffff:10.1.2.3" (an IPv4 client on a dual-stack socket) -> "10.1.2.3". */
export function normalizeIp(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return mapped ? mapped[1] : ip;
}

/** A compiled allowlist; an address matches when it falls in any of the CIDRs. */
export class IpAllowlist {
  private readonly list = new BlockList();

  constructor(cidrs: string[]) {
    for (const text of cidrs) {
      const cidr = parseCidr(text);
      if (!cidr) throw new Error(`invalid CIDR "${text}"`);
      this.list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    }
  }

  allows(ip: string): boolean {
    const address = normalizeIp(ip);
    const version = isIP(address);
    if (version === 0) return false;
    return this.list.check(address, version === 4 ? "ipv4" : "ipv6");
  }
}
