import { test } from "node:test";
import assert from "node:assert/strict";
import { displayPrefix, generateKey, isWellFormedKey, keyLength } from "../src/keys/key-format.ts";
import { hashKey } from "../src/store/key-secret.ts";
import { IpAllowlist } from "../src/auth/ip-allowlist.ts";
import { parseCidr } from "../src/config/cidr.ts";

test("§5 key format: mg_ prefix, 32 random bytes in base62, checksum; accepted without I/O", () => {
  const seen = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const key = generateKey();
    assert.match(key, /^mg_[0-9A-Za-z]{49}$/);
    assert.equal(key.length, keyLength);
    assert.ok(isWellFormedKey(key), key);
    seen.add(key);
  }
  assert.equal(seen.size, 200);
});

test("§5 malformed keys are refused by format or checksum alone", () => {
  const key = generateKey();
  // One changed character in the body breaks the checksum.
  const i = 10;
  const swapped = key.slice(0, i) + (key[i] === "a" ? "b" : "a") + key.slice(i + 1);
  assert.equal(isWellFormedKey(swapped), false);
  assert.equal(isWellFormedKey(key.slice(0, -1)), false);
  assert.equal(isWellFormedKey(`${key}x`), false);
  assert.equal(isWellFormedKey(`sk_${key.slice(3)}`), false);
  assert.equal(isWellFormedKey(key.replace(/.$/, "-")), false);
  assert.equal(isWellFormedKey(""), false);
});

test("key store keeps an HMAC under the secret and a display prefix, never the key", () => {
  const key = generateKey();
  const a = hashKey(Buffer.from("secret-one-0123456789"), key);
  const b = hashKey(Buffer.from("secret-two-0123456789"), key);
  assert.match(a, /^[0-9a-f]{64}$/);
  assert.notEqual(a, b);
  assert.equal(displayPrefix(key), key.slice(0, 11));
  assert.ok(!a.includes(key.slice(3, 20)));
});

test("§5 IP allowlist: IPv4 and IPv6 CIDRs, bare addresses, IPv4-mapped peers", () => {
  const list = new IpAllowlist(["10.1.0.0/16", "2001:db8::/32", "192.0.2.7"]);
  assert.equal(list.allows("10.1.200.3"), true);
  assert.equal(list.allows("::ffff:10.1.2.3"), true);
  assert.equal(list.allows("10.2.0.1"), false);
  assert.equal(list.allows("2001:db8:1::5"), true);
  assert.equal(list.allows("2001:db9::1"), false);
  assert.equal(list.allows("192.0.2.7"), true);
  assert.equal(list.allows("192.0.2.8"), false);
  assert.equal(list.allows("not-an-ip"), false);
  assert.equal(parseCidr("10.0.0.0/33"), null);
  assert.equal(parseCidr("10.0.0.0/x"), null);
  assert.equal(parseCidr("::/129"), null);
  assert.deepEqual(parseCidr("::1"), { address: "::1", prefix: 128, family: "ipv6" });
});
