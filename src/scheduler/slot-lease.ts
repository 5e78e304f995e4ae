import type { Engine } from "../engines/engine.ts";
import type { Lease } from "./runner-types.ts";
import type { Priority } from "./vtc-queue.ts";

/** Whom a request's slots are for: the account that is charged, its weight, its priority. */
export interface Ticket {
  account: string;
  weight: number;
  priority: Priority;
}

/** What a lease reports to, and asks of, the runner that granted it. */
export interface LeaseLedger {
  /** Whether the request now runs over its account's share (batch work beside interactive work counts as over). */
  overShare(): boolean;
  /** Whether the account is within its share and its burst of service (generations over theirs pause for it). */
  favoured(): boolean;
  /** Tokens of service the account received. */
  served(tokens: number): void;
  /** The slots are free again, after being held `heldMs`. */
  freed(heldMs: number): void;
}

/**
 * A lease of `slots` on `engine`. Its standing is read from the ledger while it is held (a released lease stands
 * over nothing), its charges go to the ledger, and `release` frees the slots once however often it is called.
 */
export function openLease(engine: Engine, slots: number, ledger: LeaseLedger): Lease {
  return new SlotLease(engine, slots, ledger);
}

/**
 * A class rather than an object literal: a literal with getters defines its accessors on every lease (one a
 * request), where a class has them once on its prototype. `charge` and `release` stay bound to their lease.
 */
class SlotLease implements Lease {
  private readonly started = Date.now();
  private released = false;
  private chargedTokens = 0;

  constructor(
    readonly engine: Engine,
    readonly slots: number,
    private readonly ledger: LeaseLedger,
  ) {}

  get charged(): number {
    return this.chargedTokens;
  }

  get overShare(): boolean {
    return !this.released && this.ledger.overShare();
  }

  get favoured(): boolean {
    return !this.released && !this.ledger.overShare() && this.ledger.favoured();
  }

  readonly charge = (tokens: number): void => {
    if (!(tokens > 0)) return;
    this.chargedTokens += tokens;
    this.ledger.served(tokens);
  };

  readonly release = (): void => {
    if (this.released) return;
    this.released = true;
    this.ledger.freed(Date.now() - this.started);
  };
}
