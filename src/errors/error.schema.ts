import { Type } from "@sinclair/typebox";

/** The §7 error envelope, for the OpenAPI document. */
export const ErrorResponse = Type.Object({
  error: Type.Object({
    message: Type.String(),
    type: Type.String(),
    code: Type.String(),
    param: Type.Union([Type.String(), Type.Null()]),
  }),
});
