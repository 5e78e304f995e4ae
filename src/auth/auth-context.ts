import type { Endpoint } from "../config/config.schema.ts";
import type { Plan } from "../config/app-config.ts";
import type { IpAllowlist } from "./ip-allowlist.ts";

/** What the auth plugin attaches to an authenticated /v1 request (`request.auth`). */
export interface AuthContext {
  keyId: string;
  /** Display prefix of the key; the only part of a key that may be logged. */
  keyPrefix: string;
  accountId: string;
  accountName: string;
  plan: Plan;
  /** Model glob patterns the key itself is limited to; null = no key-level limit. */
  modelScopes: string[] | null;
  /** Endpoints the key itself is limited to; null = no key-level limit. */
  endpointScopes: Endpoint[] | null;
  /** The dedicated deployment the key is bound to, or null. */
  deployment: string | null;
  /** The account's IP allowlist, compiled; null when it has none. */
  allowlist: IpAllowlist | null;
}
