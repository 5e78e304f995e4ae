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

/** Every error status an inference endpoint can answer (§7), for the OpenAPI document. */
export const inferenceErrors = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  413: ErrorResponse,
  429: ErrorResponse,
  500: ErrorResponse,
  503: ErrorResponse,
};
