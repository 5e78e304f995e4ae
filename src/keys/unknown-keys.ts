/** How long a key the store does not hold is answered 401 without asking the store again. */
export const unknownKeyTtlMs = 5_000;
/** Hashes held at most; the oldest go first. */
const maxUnknownKeys = 10_000;

/**
 * A bounded negative cache of key hashes the store answered "not found" for, so that repeating made-up keys does not
 * reach the database. Only ever a hash of a value someone sent, never a key that existed: a key's value is known
 * only once its row is written, so no entry can hide a key created later (creating one clears it all the same).
 */
export class UnknownKeys {
  /** hash → expiry, oldest first. */
  private readonly hashes = new Map<string, number>();

  constructor(
    private readonly ttlMs = unknownKeyTtlMs,
    private readonly max = maxUnknownKeys,
  ) {}

  has(hash: string, now: number): boolean {
    const until = this.hashes.get(hash);
    if (until === undefined) return false;
    if (until > now) return true;
    this.hashes.delete(hash);
    return false;
  }

  add(hash: string, now: number): void {
    this.hashes.delete(hash);
    if (this.hashes.size >= this.max) this.hashes.delete(this.hashes.keys().next().value!);
    this.hashes.set(hash, now + this.ttlMs);
  }

  clear(): void {
    this.hashes.clear();
  }

  get size(): number {
    return this.hashes.size;
  }
}
