import { Type, type Static } from "@sinclair/typebox";
import { Endpoint } from "../../config/config.schema.ts";

export const CreateAccountBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    plan: Type.Optional(Type.String({ minLength: 1 })),
    allowIps: Type.Optional(Type.Array(Type.String())),
    contacts: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);
export type CreateAccountBody = Static<typeof CreateAccountBody>;

export const UpdateAccountBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    plan: Type.Optional(Type.String({ minLength: 1 })),
    allowIps: Type.Optional(Type.Array(Type.String())),
    contacts: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);
export type UpdateAccountBody = Static<typeof UpdateAccountBody>;

export const CreateKeyBody = Type.Object(
  {
    account: Type.String({ minLength: 1 }),
    name: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    models: Type.Optional(Type.Union([Type.Array(Type.String({ minLength: 1 })), Type.Null()])),
    endpoints: Type.Optional(Type.Union([Type.Array(Endpoint), Type.Null()])),
    deployment: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
  },
  { additionalProperties: false },
);
export type CreateKeyBody = Static<typeof CreateKeyBody>;

export const AccountParams = Type.Object({ account: Type.String() });
export type AccountParams = Static<typeof AccountParams>;

export const KeyParams = Type.Object({ id: Type.String() });
export type KeyParams = Static<typeof KeyParams>;

export const AccountQuery = Type.Object({ account: Type.Optional(Type.String()) }, { additionalProperties: false });
export type AccountQuery = Static<typeof AccountQuery>;
