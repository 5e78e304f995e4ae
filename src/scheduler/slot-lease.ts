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
  const started = Date.now();
  let released = false;
  let charged = 0;
  return {
    engine,
    slots,
    get charged() {
      return charged;
    },
    get overShare() {
      return !released && ledger.overShare();
    },
    get favoured() {
      return !released && !ledger.overShare() && ledger.favoured();
    },
    charge: (tokens) => {
      if (!(tokens > 0)) return;
      charged += tokens;
      ledger.served(tokens);
    },
    release: () => {
      if (released) return;
      released = true;
      ledger.freed(Date.now() - started);
    },
  };
}
