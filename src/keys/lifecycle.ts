import { allEndpoints, type Endpoint } from "../config/config.schema.ts";
import type { AppConfig } from "../config/app-config.ts";
import type { Account, AccountBudget } from "../store/accounts.repo.ts";
import { parseMoney } from "../config/money.ts";
import type { ApiKeyRecord } from "../store/keys.repo.ts";
import type { AuditActor, AuditEntry } from "../store/audit.repo.ts";
import type { Store, StoreTransaction } from "../store/store.ts";
import { AppError } from "../errors/app-error.ts";
import { isStoreBusy, isStoreUnreachable } from "../store/store-health.ts";
import type { RevocationBus } from "./revocation-bus.ts";
import { parseCidr } from "../config/cidr.ts";
import { displayPrefix, generateKey, newId } from "./key-format.ts";
import { hashKey } from "../store/key-secret.ts";

/**
 * Account and key operations shared by the CLI, the admin API and test helpers. Input problems throw
 * LifecycleError; the CLI turns it into a CliError, the admin API into a 400/404 envelope.
 */
export class LifecycleError extends Error {
  constructor(
    readonly code: "invalid_parameter" | "not_found",
    readonly param: string | null,
    message: string,
  ) {
    super(message);
    this.name = "LifecycleError";
  }
}

/**
 * What an HTTP caller (the admin API) is told of a failed lifecycle operation: the database away or busy is 503
 * overloaded (retry), an unknown account or key is 404 model_not_found (the spec's one 404 code), any other
 * LifecycleError 400 invalid_parameter; anything else goes on as it is, to the error handler.
 */
export function lifecycleToAppError(err: unknown): unknown {
  if (isStoreUnreachable(err)) return new AppError("overloaded", { message: "The database is unreachable; retry shortly.", retryAfterMs: 2000 });
  if (isStoreBusy(err)) return new AppError("overloaded", { message: "The database is busy; retry shortly.", retryAfterMs: 1000 });
  if (!(err instanceof LifecycleError)) return err;
  if (err.code === "not_found") return new AppError("model_not_found", { param: err.param, message: err.message });
  return new AppError("invalid_parameter", { param: err.param, message: err.message });
}

/** What the CLI and admin API show of an account: the stored record, which holds nothing secret. */
export type AccountView = Account;

export type KeyView = Omit<ApiKeyRecord, "accountId"> & { account: string; accountName: string };

/** The create/rotate answer; `key` is the only time the value is ever shown. */
export type CreatedKey = Omit<KeyView, "lastUsedAt" | "revokedAt"> & { key: string };

export interface AccountInput {
  name?: string;
  plan?: string;
  allowIps?: string[];
  contacts?: string[];
  /** The account's own budget (issue 32), overriding its plan's; null goes back to the plan's. */
  budget?: { amount: number | string; period: "day" | "month" } | null;
}

export interface KeyInput {
  account: string;
  name?: string | null;
  models?: string[] | null;
  endpoints?: string[] | null;
  deployment?: string | null;
}

/** Who asks for an operation, for the audit log: every account and key change is recorded with it. */
export interface AuditContext {
  actor: AuditActor;
  /** The console user (member or operator) by id and email; absent for the CLI and the admin token. */
  actorId?: string | null;
  actorEmail?: string | null;
  /** A registered contact of the account the operation is done for (support acting on an emailed request). */
  onBehalfOf?: string | null;
  /** The client address of an HTTP call; the local user and host for the CLI. */
  source?: string | null;
}

/** `onBehalfOf`, checked against the account's registered contacts (refused otherwise, naming them). */
function onBehalfOf(by: AuditContext, account: { name: string; contacts: string[] }): string | null {
  const email = by.onBehalfOf?.trim() || null;
  if (email !== null && !account.contacts.includes(email)) {
    const registered = account.contacts.length > 0 ? account.contacts.join(", ") : "none";
    throw new LifecycleError("invalid_parameter", "on_behalf_of", `"${email}" is not a registered contact of account "${account.name}" (registered: ${registered})`);
  }
  return email;
}

/** Runs an operation's writes and its audit entry in one transaction: both land, or neither. */
async function audited<T>(
  store: Store,
  by: AuditContext,
  entry: { action: string; onBehalfOf: string | null; accountId: (result: T) => string; keyId?: (result: T) => string; detail?: (result: T) => Record<string, unknown> | null },
  write: (tx: StoreTransaction) => Promise<T>,
): Promise<T> {
  return store.transaction(async (tx) => {
    const result = await write(tx);
    await tx.audit.append({
      id: newId("aud"),
      at: now(),
      actor: by.actor,
      actorId: by.actorId ?? null,
      actorEmail: by.actorEmail ?? null,
      onBehalfOf: entry.onBehalfOf,
      action: entry.action,
      accountId: entry.accountId(result),
      keyId: entry.keyId?.(result) ?? null,
      source: by.source ?? null,
      detail: entry.detail?.(result) ?? null,
    });
    return result;
  });
}

type FieldChanges = Record<string, { from: unknown; to: unknown }>;

/**
 * Old and new values of the audited fields, for the entry's `detail.changes`: every field for a create (`before` null,
 * so `from` is null), the fields whose value differs for an update.
 */
function fieldChanges<T extends object>(before: T | null, after: T, fields: (keyof T & string)[]): FieldChanges {
  const changes: FieldChanges = {};
  for (const field of fields) {
    const from = before === null ? null : before[field];
    if (before !== null && JSON.stringify(from) === JSON.stringify(after[field])) continue;
    changes[field] = { from, to: after[field] };
  }
  return changes;
}

const accountFields = ["name", "plan", "allowIps", "contacts", "budget"] as const satisfies (keyof Account)[];
const keyFields = ["name", "models", "endpoints", "deployment"] as const satisfies (keyof CreatedKey)[];

const namePattern = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const emailPattern = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const deploymentPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function now(): string {
  return new Date().toISOString();
}

function keyView(k: ApiKeyRecord, account: Account): KeyView {
  return {
    id: k.id,
    prefix: k.prefix,
    account: k.accountId,
    accountName: account.name,
    name: k.name,
    models: k.models,
    endpoints: k.endpoints,
    deployment: k.deployment,
    createdAt: k.createdAt,
    lastUsedAt: k.lastUsedAt,
    revokedAt: k.revokedAt,
  };
}

function checkPlan(config: AppConfig, plan: string): void {
  if (!config.plans.has(plan)) {
    throw new LifecycleError("invalid_parameter", "plan", `unknown plan "${plan}" (configured: ${[...config.plans.keys()].join(", ")})`);
  }
}

function checkAllowIps(config: AppConfig, plan: string, allowIps: string[]): string[] {
  const cleaned = allowIps.map((c) => c.trim()).filter(Boolean);
  for (const c of cleaned) {
    if (!parseCidr(c)) throw new LifecycleError("invalid_parameter", "allowIps", `invalid CIDR "${c}" (e.g. 203.0.113.0/24, 2001:db8::/32)`);
  }
  if (cleaned.length > 0 && !config.plans.get(plan)?.ipAllowlist) {
    throw new LifecycleError("invalid_parameter", "allowIps", `plan "${plan}" does not include IP allowlisting (set ipAllowlist: true on the plan)`);
  }
  return cleaned;
}

function checkContacts(contacts: string[]): string[] {
  const cleaned = contacts.map((c) => c.trim()).filter(Boolean);
  for (const c of cleaned) {
    if (!emailPattern.test(c)) throw new LifecycleError("invalid_parameter", "contacts", `invalid contact address "${c}"`);
  }
  return cleaned;
}

function checkBudget(budget: NonNullable<AccountInput["budget"]> | null): AccountBudget | null {
  if (budget === null) return null;
  if (budget.period !== "day" && budget.period !== "month") throw new LifecycleError("invalid_parameter", "budget.period", `budget period "${String(budget.period)}" is not day or month`);
  try {
    return { amountMicros: parseMoney(budget.amount, "budget.amount"), period: budget.period };
  } catch (err) {
    throw new LifecycleError("invalid_parameter", "budget.amount", (err as Error).message);
  }
}

export async function findAccount(store: Store, idOrName: string): Promise<Account> {
  const account = await store.accounts.find(idOrName);
  if (!account) throw new LifecycleError("not_found", "account", `no account "${idOrName}"`);
  return account;
}

export async function createAccount(store: Store, config: AppConfig, input: AccountInput, by: AuditContext): Promise<AccountView> {
  const name = input.name?.trim() ?? "";
  if (!namePattern.test(name) || name.startsWith("acct_")) {
    throw new LifecycleError("invalid_parameter", "name", `invalid account name "${name}" (letters, digits, . _ @ -; up to 64)`);
  }
  const plan = input.plan ?? config.defaultPlan;
  checkPlan(config, plan);
  const allowIps = checkAllowIps(config, plan, input.allowIps ?? []);
  const contacts = checkContacts(input.contacts ?? []);
  if (await store.accounts.find(name)) throw new LifecycleError("invalid_parameter", "name", `account "${name}" already exists`);
  const asked = onBehalfOf(by, { name, contacts });
  // An account is created without its own budget: that field is recorded when an update sets it.
  const detail = (a: Account) => ({ name: a.name, plan: a.plan, changes: fieldChanges(null, a, accountFields.filter((f) => f !== "budget")) });
  return audited(store, by, { action: "account.create", onBehalfOf: asked, accountId: (a) => a.id, detail }, (tx) =>
    tx.accounts.insert({ id: newId("acct"), name, plan, allowIps, contacts, createdAt: now() }),
  );
}

export async function updateAccount(store: Store, config: AppConfig, idOrName: string, input: AccountInput, by: AuditContext): Promise<AccountView> {
  const account = await findAccount(store, idOrName);
  const asked = onBehalfOf(by, account);
  const plan = input.plan ?? account.plan;
  checkPlan(config, plan);
  const allowIps = checkAllowIps(config, plan, input.allowIps ?? account.allowIps);
  const contacts = input.contacts === undefined ? undefined : checkContacts(input.contacts);
  const budget = input.budget === undefined ? undefined : checkBudget(input.budget);
  let name: string | undefined;
  if (input.name !== undefined && input.name !== account.name) {
    name = input.name.trim();
    if (!namePattern.test(name) || name.startsWith("acct_")) throw new LifecycleError("invalid_parameter", "name", `invalid account name "${name}"`);
    if (await store.accounts.find(name)) throw new LifecycleError("invalid_parameter", "name", `account "${name}" already exists`);
  }
  const detail = (after: Account) => {
    const changes = fieldChanges(account, after, [...accountFields]);
    return { changed: Object.keys(changes), changes };
  };
  return audited(store, by, { action: "account.update", onBehalfOf: asked, accountId: () => account.id, detail }, async (tx) => {
    await tx.accounts.update(account.id, { name, plan, allowIps, contacts, budget });
    return (await tx.accounts.find(account.id))!;
  });
}

export async function listAccounts(store: Store): Promise<AccountView[]> {
  return store.accounts.list();
}

function checkScopes(input: KeyInput): { models: string[] | null; endpoints: Endpoint[] | null; deployment: string | null } {
  let models: string[] | null = null;
  if (input.models && input.models.length > 0) {
    models = input.models.map((m) => m.trim()).filter(Boolean);
    if (models.length === 0) models = null;
  }
  let endpoints: Endpoint[] | null = null;
  if (input.endpoints && input.endpoints.length > 0) {
    endpoints = [];
    for (const e of input.endpoints.map((x) => x.trim()).filter(Boolean)) {
      if (!allEndpoints.includes(e as Endpoint)) {
        throw new LifecycleError("invalid_parameter", "endpoints", `unknown endpoint "${e}" (one of ${allEndpoints.join(", ")})`);
      }
      if (!endpoints.includes(e as Endpoint)) endpoints.push(e as Endpoint);
    }
  }
  const deployment = input.deployment?.trim() || null;
  if (deployment !== null && !deploymentPattern.test(deployment)) {
    throw new LifecycleError("invalid_parameter", "deployment", `invalid deployment "${deployment}"`);
  }
  return { models, endpoints, deployment };
}

async function insertKey(tx: StoreTransaction, keySecret: Buffer, account: Account, fields: ReturnType<typeof checkScopes> & { name: string | null }): Promise<CreatedKey> {
  const key = generateKey();
  const record = await tx.keys.insert(
    {
      id: newId("key"),
      accountId: account.id,
      prefix: displayPrefix(key),
      name: fields.name,
      models: fields.models,
      endpoints: fields.endpoints,
      deployment: fields.deployment,
      createdAt: now(),
      lastUsedAt: null,
      revokedAt: null,
    },
    hashKey(keySecret, key),
  );
  return {
    id: record.id,
    key,
    prefix: record.prefix,
    account: account.id,
    accountName: account.name,
    name: record.name,
    models: record.models,
    endpoints: record.endpoints,
    deployment: record.deployment,
    createdAt: record.createdAt,
  };
}

export async function createKey(store: Store, input: KeyInput, by: AuditContext): Promise<CreatedKey> {
  const account = await findAccount(store, input.account);
  const scopes = checkScopes(input);
  const asked = onBehalfOf(by, account);
  const detail = (k: CreatedKey) => ({ prefix: k.prefix, name: k.name, changes: fieldChanges(null, k, [...keyFields]) });
  return audited(store, by, { action: "key.create", onBehalfOf: asked, accountId: () => account.id, keyId: (k) => k.id, detail }, (tx) =>
    insertKey(tx, store.keySecret, account, { ...scopes, name: input.name?.trim() || null }),
  );
}

async function findKey(store: Store, id: string): Promise<ApiKeyRecord> {
  const key = await store.keys.get(id);
  if (!key) throw new LifecycleError("not_found", "id", `no key "${id}"`);
  return key;
}

/** A second key with the same account, scopes and deployment; the old key stays active until revoked. */
export async function rotateKey(store: Store, id: string, by: AuditContext): Promise<CreatedKey> {
  const old = await findKey(store, id);
  if (old.revokedAt) throw new LifecycleError("invalid_parameter", "id", `key "${id}" is revoked; create a new key instead`);
  const account = await findAccount(store, old.accountId);
  const asked = onBehalfOf(by, account);
  // The new key takes the old one's name, scopes and deployment: recorded as a create's values.
  const detail = (k: CreatedKey) => ({ replaces: old.id, prefix: k.prefix, changes: fieldChanges(null, k, [...keyFields]) });
  return audited(store, by, { action: "key.rotate", onBehalfOf: asked, accountId: () => account.id, keyId: (k) => k.id, detail }, (tx) =>
    insertKey(tx, store.keySecret, account, { models: old.models, endpoints: old.endpoints, deployment: old.deployment, name: old.name }),
  );
}

/**
 * Revokes a key for good (revoking it again answers its original revocation time), and tells every replica through
 * `bus` (Redis) so caches drop it at once. While the database is unreachable, a revocation can still be made with a
 * bus: it takes effect on every replica at once and is written, with its audit entry, when the database returns
 * (`pending: true`, writePendingRevocations).
 */
export async function revokeKey(store: Store, id: string, by: AuditContext, bus: RevocationBus | null = null): Promise<{ id: string; revokedAt: string; pending?: boolean }> {
  const at = now();
  try {
    const found = await findKey(store, id);
    const asked = onBehalfOf(by, await findAccount(store, found.accountId));
    const key = await audited(store, by, { action: "key.revoke", onBehalfOf: asked, accountId: () => found.accountId, keyId: () => id, detail: () => ({ prefix: found.prefix }) }, (tx) =>
      tx.keys.revoke(id, at),
    );
    await bus?.publish(id, key!.revokedAt!).catch(() => {});
    return { id, revokedAt: key!.revokedAt! };
  } catch (err) {
    if (!bus || !isStoreUnreachable(err)) throw err;
    // The account and its contacts are out of reach: the entry is completed when it is written.
    const entry: AuditEntry = { id: newId("aud"), at, actor: by.actor, actorId: by.actorId ?? null, actorEmail: by.actorEmail ?? null, onBehalfOf: by.onBehalfOf?.trim() || null, action: "key.revoke", accountId: null, keyId: id, source: by.source ?? null, detail: null };
    await bus.holdPending(id, at, entry);
    await bus.publish(id, at);
    return { id, revokedAt: at, pending: true };
  }
}

/**
 * Writes one revocation accepted while the database was unreachable, with its audit entries, in one transaction.
 * An entry another replica wrote already is skipped (entries keep the id they were given when held). The claimed
 * on-behalf-of contact is checked now: one the account does not register is kept as `detail.unverifiedOnBehalfOf`.
 * Returns false when this database holds no such key (another deployment sharing the Redis writes it).
 */
export async function writePendingRevocation(store: Store, keyId: string, revokedAt: string, entries: AuditEntry[]): Promise<boolean> {
  return store.transaction(async (tx) => {
    const key = await tx.keys.revoke(keyId, revokedAt);
    if (!key) return false;
    const account = await tx.accounts.find(key.accountId);
    for (const entry of entries) {
      const claimed = entry.onBehalfOf;
      const verified = claimed !== null && Boolean(account?.contacts.includes(claimed));
      await tx.audit.appendOnce({
        ...entry,
        accountId: key.accountId,
        onBehalfOf: verified ? claimed : null,
        detail: { prefix: key.prefix, pending: true, ...(claimed !== null && !verified ? { unverifiedOnBehalfOf: claimed } : {}) },
      });
    }
    return true;
  });
}

/** Writes every revocation held in `bus` that this database can take; stops at the first database error. */
export async function writePendingRevocations(store: Store, bus: RevocationBus, log: { info(obj: object, msg: string): void }): Promise<void> {
  const pending = await bus.pending();
  const entries = await bus.pendingAudit();
  const keyIds = new Set([...pending.keys(), ...entries.map((e) => e.keyId).filter((id): id is string => id !== null)]);
  for (const keyId of keyIds) {
    const held = entries.filter((e) => e.keyId === keyId);
    const revokedAt = pending.get(keyId) ?? held[0].at;
    if (!(await store.health.run(() => writePendingRevocation(store, keyId, revokedAt, held)))) continue;
    await bus.clearPending(keyId, held.map((e) => e.id));
    log.info({ keyId }, "wrote a revocation accepted while the database was unreachable");
  }
}

export async function listKeys(store: Store, accountIdOrName?: string): Promise<KeyView[]> {
  const accounts = new Map((await store.accounts.list()).map((a) => [a.id, a]));
  let accountId: string | undefined;
  if (accountIdOrName) accountId = (await findAccount(store, accountIdOrName)).id;
  return (await store.keys.list(accountId)).map((k) => keyView(k, accounts.get(k.accountId)!));
}
