import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

export interface Account {
  id: string;
  name: string;
  plan: string;
  allowIps: string[];
  contacts: string[];
  createdAt: string;
  /** The account's own budget, overriding its plan's (issue 32); null: the plan's. */
  budget?: AccountBudget | null;
}

/** A budget in micro-units of the config's currency per UTC day or month. */
export interface AccountBudget {
  amountMicros: number;
  period: "day" | "month";
}

type Row = Database["accounts"];

export function toAccount(row: Row): Account {
  return {
    id: row.id,
    name: row.name,
    plan: row.plan,
    allowIps: JSON.parse(row.allow_ips) as string[],
    contacts: JSON.parse(row.contacts) as string[],
    createdAt: row.created_at,
    budget: row.budget ? (JSON.parse(row.budget) as AccountBudget) : null,
  };
}

export class AccountsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(account: Account): Promise<Account> {
    await this.db
      .insertInto("accounts")
      .values({
        id: account.id,
        name: account.name,
        plan: account.plan,
        allow_ips: JSON.stringify(account.allowIps),
        contacts: JSON.stringify(account.contacts),
        created_at: account.createdAt,
        budget: account.budget ? JSON.stringify(account.budget) : null,
      })
      .execute();
    return account;
  }

  /** By id (`acct_…`) or by name. */
  async find(idOrName: string): Promise<Account | null> {
    const row = await this.db
      .selectFrom("accounts")
      .selectAll()
      .where((eb) => eb.or([eb("id", "=", idOrName), eb("name", "=", idOrName)]))
      .executeTakeFirst();
    return row ? toAccount(row) : null;
  }

  async any(): Promise<boolean> {
    return (await this.db.selectFrom("accounts").select("id").limit(1).executeTakeFirst()) !== undefined;
  }

  async list(): Promise<Account[]> {
    const rows = await this.db.selectFrom("accounts").selectAll().orderBy("created_at").orderBy("name").execute();
    return rows.map(toAccount);
  }

  async update(id: string, changes: { plan?: string; allowIps?: string[]; contacts?: string[]; name?: string; budget?: AccountBudget | null }): Promise<void> {
    const values: Partial<Row> = {};
    if (changes.name !== undefined) values.name = changes.name;
    if (changes.plan !== undefined) values.plan = changes.plan;
    if (changes.allowIps !== undefined) values.allow_ips = JSON.stringify(changes.allowIps);
    if (changes.contacts !== undefined) values.contacts = JSON.stringify(changes.contacts);
    if (changes.budget !== undefined) values.budget = changes.budget ? JSON.stringify(changes.budget) : null;
    if (Object.keys(values).length === 0) return;
    await this.db.updateTable("accounts").set(values).where("id", "=", id).execute();
  }
}
