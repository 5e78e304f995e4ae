// Issue 45.1, weighted rollout: a route's weighted split, sticky per account and conversation, on the real upstream
// engine in front of the canned upstream (its own process): cheap enough for 2,000 requests in a few seconds.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { startCanned, type Peer } from "../harness/peers.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { usageRows } from "./helpers/usage.ts";

const adminToken = "Lq2Wm9Xn4Rb7Tc1Vd8Ze5Yf3Ug6Ah0Sj-Kp_Io";
let canned: Peer;
let srv: TestServer;

before(async () => {
  canned = await startCanned();
  const upstream = { engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 64 }] };
  srv = await startServer({
    adminToken,
    plans: { default: { rateLimit: { requests: 100_000, window: "1m" } } },
    models: [
      { id: "stable", ...upstream },
      { id: "candidate", ...upstream },
    ],
    routes: [{ id: "chat-default", targets: [{ model: "stable", weight: 90 }, { model: "candidate", weight: 10 }] }],
  });
});

after(async () => {
  await srv?.close();
  canned?.child.kill();
});

interface Answer {
  model: string;
  header: string | null;
}

async function ask(key: string, messages: { role: string; content: string }[]): Promise<Answer> {
  const res = await srv.post("/v1/chat/completions", { model: "chat-default", messages, max_tokens: 4 }, { key });
  assert.equal(res.status, 200, await res.clone().text());
  return { model: ((await res.json()) as { model: string }).model, header: res.headers.get("x-modelgate-route") };
}

/** Runs `count` tasks, `concurrency` at a time. */
async function pool<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

// A request's place in the split is a hash of its account and conversation, so a random account id would make the
// count random too (±2% is about 3σ: 0.3% of runs would fail). These fixed accounts land 205 of the 2,000 on the 10%
// target, and 3 of the 24 conversations below.
const splitAccount = "acct_RoutingSplit00002";
const turnsAccount = "acct_RoutingSplit00001";

test("issue 45.1 weighted rollout: 2,000 requests over a 90/10 route land 10% ± 2% on the second target, each answer naming its target, each charged to it", async () => {
  const { key, id, accountId } = await srv.createKey({ accountId: splitAccount });
  const answers = await pool(2000, 32, (i) => ask(key, [{ role: "user", content: `Conversation ${i}: tell me a story about the number ${i * 7919}.` }]));
  const onCandidate = answers.filter((a) => a.model === "candidate").length;
  const onStable = answers.filter((a) => a.model === "stable").length;
  assert.equal(onCandidate + onStable, 2000);
  assert.ok(onCandidate >= 160 && onCandidate <= 240, `${onCandidate} of 2000 on the 10% target`);
  for (const a of answers) assert.equal(a.header, `chat-default; target=${a.model}; fallbacks=0`);
  // Usage is charged to the target that served, once per request.
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  const requests = Object.fromEntries(rows.map(([model, , count]) => [model, count]));
  assert.deepEqual(requests, { stable: onStable, candidate: onCandidate });
  // The split in the metrics, and in the admin API with what each target answered over the last minute (all of
  // them unless the machine was slow enough for the run to take longer than that).
  const metrics = await (await srv.get("/metrics", { key: adminToken })).text();
  assert.match(metrics, new RegExp(`modelgate_route_requests_total\\{route="chat-default",target="stable"\\} ${onStable}\\n`));
  assert.match(metrics, new RegExp(`modelgate_route_requests_total\\{route="chat-default",target="candidate"\\} ${onCandidate}\\n`));
  const route = (await (await srv.get("/admin/v1/routes/chat-default", { key: adminToken })).json()) as { targets: { model: string; share: number; servedLastMinute: number }[] };
  assert.deepEqual(
    route.targets.map((t) => [t.model, t.share]),
    [
      ["stable", 0.9],
      ["candidate", 0.1],
    ],
  );
  assert.ok(route.targets[0].servedLastMinute > 0 && route.targets[0].servedLastMinute <= onStable);
  assert.ok(route.targets[1].servedLastMinute > 0 && route.targets[1].servedLastMinute <= onCandidate);
});

test("issue 45.1 weighted rollout: every turn of one conversation lands on the target of its first turn", async () => {
  const { key } = await srv.createKey({ accountId: turnsAccount });
  const targets = await pool(24, 8, async (c) => {
    const messages = [
      { role: "system", content: "You tell short stories." },
      { role: "user", content: `Tell me story number ${c}.` },
    ];
    const seen = new Set<string>();
    for (let turn = 0; turn < 4; turn++) {
      const { model } = await ask(key, messages);
      seen.add(model);
      messages.push({ role: "assistant", content: "Once upon a time there was a little girl." }, { role: "user", content: `And then, part ${turn + 2}?` });
    }
    assert.equal(seen.size, 1, `conversation ${c} was served by ${[...seen].join(" and ")}`);
    return [...seen][0];
  });
  // Both targets served some conversations, so stickiness is not one target taking everything.
  assert.deepEqual(new Set(targets), new Set(["stable", "candidate"]));
});
