import { test } from "node:test";
import assert from "node:assert/strict";
import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import { bodyPending } from "../src/http/request-body.ts";

function request(headers: Record<string, string>, complete = false): IncomingMessage {
  const message = new IncomingMessage(new Socket());
  message.headers = headers;
  message.complete = complete;
  return message;
}

test("issue 46: a request has a body still to come only with a Content-Length above 0 or a Transfer-Encoding (RFC 9112 6.3), until the parser has read it", () => {
  assert.equal(bodyPending(request({})), false, "a GET without either header has no body, though the parser has not marked it complete");
  assert.equal(bodyPending(request({ "content-length": "0" })), false);
  assert.equal(bodyPending(request({ "content-length": "12" })), true);
  assert.equal(bodyPending(request({ "transfer-encoding": "chunked" })), true);
  assert.equal(bodyPending(request({ "content-length": "12" }, true)), false, "read to its end");
  const destroyed = request({ "transfer-encoding": "chunked" });
  destroyed.destroy();
  assert.equal(bodyPending(destroyed), false, "nothing more comes off a destroyed request");
});
