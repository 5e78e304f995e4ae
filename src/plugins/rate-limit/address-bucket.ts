import ipaddr from "ipaddr.js";

/**
 * The anonymous limiter's bucket for a client address: an IPv4 address is its own bucket; an IPv6 address counts
 * with every address in its network of `ipv6Prefix` bits (one /64 is one customer, who could otherwise rotate
 * through 2^64 addresses and buckets). An IPv4 address written as IPv6 (`::ffff:10.1.2.3`) is IPv4.
 */
export function addressBucket(address: string, ipv6Prefix: number): string {
  if (!ipaddr.IPv6.isValid(address)) return address;
  const ip = ipaddr.IPv6.parse(address);
  if (ip.isIPv4MappedAddress()) return ip.toIPv4Address().toString();
  const parts = ip.parts.map((part, i) => {
    const kept = Math.min(Math.max(ipv6Prefix - i * 16, 0), 16);
    return part & ((0xffff << (16 - kept)) & 0xffff);
  });
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/${ipv6Prefix}`;
}
