import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

/** Values the store keeps about itself, written once (the serving role may insert them, never change them). */
export class StoreMetaRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async get(name: string): Promise<string | null> {
    return (await this.db.selectFrom("store_meta").select("value").where("name", "=", name).executeTakeFirst())?.value ?? null;
  }

  /** Writes `value` unless `name` is already set (by another replica at the same moment); returns the stored value. */
  async setOnce(name: string, value: string): Promise<string> {
    await this.db.insertInto("store_meta").values({ name, value }).onConflict((oc) => oc.column("name").doNothing()).execute();
    return (await this.get(name))!;
  }
}
