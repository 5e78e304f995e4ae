import assert from "node:assert/strict";
import OpenAI from "openai";

/** The §7 envelope of an error response, with its status; the message must be a string. */
export async function errorOf(res: Response): Promise<{ status: number; type: string; code: string; param: string | null }> {
  const body = (await res.json()) as { error: { type: string; code: string; param: string | null; message: string } };
  assert.equal(typeof body.error.message, "string");
  return { status: res.status, type: body.error.type, code: body.error.code, param: body.error.param };
}

/** The APIError an openai client call must reject with. */
export async function apiErrorOf(promise: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    return err;
  }
  assert.fail("expected an API error");
}
