import { Type, type Static, type TSchema } from "@sinclair/typebox";

const LoadState = Type.Union(["missing", "unloaded", "loading", "ready", "failed"].map((s) => Type.Literal(s)));
const FallbackReason = Type.Union(["unavailable", "overloaded", "upstream_error", "context_window"].map((r) => Type.Literal(r)));

/** A route (issue 45) as the admin API shows it: its split, its fallbacks, and what each did over the last minute. */
export const AdminRoute = Type.Object(
  {
    id: Type.String({ description: "The public model id clients name" }),
    object: Type.Literal("route"),
    targets: Type.Array(
      Type.Object({
        model: Type.String(),
        weight: Type.Number(),
        share: Type.Number({ description: "Its configured part of the route's new conversations (0..1)" }),
        state: LoadState,
        servedLastMinute: Type.Integer({ description: "Requests it answered for this route over the last minute" }),
      }),
      { description: "The weighted split" },
    ),
    fallbacks: Type.Array(
      Type.Object({ model: Type.String(), state: LoadState, servedLastMinute: Type.Integer() }),
      { description: "Tried in this order when a target fails with a reason in fallbackOn" },
    ),
    fallbackOn: Type.Array(FallbackReason),
    capabilities: Type.Array(Type.String(), { description: "What every target and fallback can do" }),
    contextSize: Type.Union([Type.Integer(), Type.Null()], { description: "The largest configured context window of its models" }),
    fallbacksLastMinute: Type.Array(
      Type.Object({ from: Type.String(), reason: FallbackReason, count: Type.Integer() }),
      { description: "Requests that moved on from a model over the last minute, by reason" },
    ),
  },
  { $id: "AdminRoute" },
);
export type AdminRoute = Static<typeof AdminRoute>;
export const AdminRouteList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Type.Ref(AdminRoute)) }, { $id: "AdminRouteList" });

export const routesAdminSchemas: TSchema[] = [AdminRoute, AdminRouteList];
