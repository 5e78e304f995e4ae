import { BlockList, isIP } from "node:net";
import { parseCidr } from "../config/cidr.ts";

/** "::ffff:10.1.2.3" (an IPv4 client on a dual-stack socket) -> "10.1.2.3". */
export function normalizeIp(ip: string): string {
  if (!ip.startsWith("::")) return ip;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return mapped ? mapped[1] : ip;
}

/** A compiled allowlist; an address matches when it falls in any of the CIDRs. */
export class IpAllowlist {
  private readonly list = new BlockList();
  /** No CIDRs: nothing is allowed, and nothing needs checking (BlockList.check builds a native address per call). */
  readonly empty: boolean;

  constructor(cidrs: string[]) {
    this.empty = cidrs.length === 0;
    for (const text of cidrs) {
      const cidr = parseCidr(text);
      if (!cidr) throw new Error(`invalid CIDR "${text}"`);
      this.list.addSubnet(cidr.address, cidr.prefix, cidr.family);
    }
  }

  allows(ip: string): boolean {
    if (this.empty) return false;
    const address = normalizeIp(ip);
    const version = isIP(address);
    if (version === 0) return false;
    return this.list.check(address, version === 4 ? "ipv4" : "ipv6");
  }
}
