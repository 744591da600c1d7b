// Publishes a plan's steps with the JavaScript JetStream client
// (@nats-io/jetstream, pinned by package-lock.json) and prints one JSON
// line per step, in step order, for internal/jsclients to check.
//
// The plan comes on stdin:
//   {"servers": "nats://127.0.0.1:PORT",
//    "steps": [{"subject": "...", "dataBase64": "...", "msgID": "...",
//               "headers": {"Name": ["v1", ...]}, "expectStream": "...",
//               "async": false}, ...]}
//
// A step with async false is published once every earlier step has its
// answer. Steps with async true are published without waiting for any
// answer: the client has no publishAsync, its concurrent publish
// promises are the async form. All go out on one connection, so the
// server sees them in step order.
//
// Success: {"ok":true,"stream":...,"seq":...,"duplicate":...}
// Failure: {"ok":false,"name":...,"message":...,"code":...,"err_code":...},
// code and err_code being the JetStream API error's "code" (an HTTP-like
// status) and "err_code" (JetStream's own number), when the failure
// is such an error.
//
// Exit status 1 (and a message on stderr) only when the script itself
// cannot do its work: a bad plan, no connection.

import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import { jetstream, JetStreamApiError } from "@nats-io/jetstream";

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

// The answer's fields, as the client hands them over (no defaults
// filled in here, so a missing field shows as missing).
function success(pa) {
  return { ok: true, stream: pa.stream, seq: pa.seq, duplicate: !!pa.duplicate };
}

// The JetStream API error behind err, if any. JetStreamApiError's own
// accessors are named confusingly (.code is the API's err_code, .status
// its code), so read the API's error object itself through apiError().
// JetStreamNotEnabled carries one as its cause.
function apiErrorOf(err) {
  for (let e = err; e; e = e.cause) {
    if (e instanceof JetStreamApiError) return e.apiError();
  }
  return null;
}

function failure(err) {
  const out = { ok: false, name: err?.name ?? typeof err, message: err?.message ?? String(err) };
  const api = apiErrorOf(err);
  if (api) {
    out.code = api.code;
    out.err_code = api.err_code;
  }
  return out;
}

function publishOpts(step) {
  const opts = {};
  if (step.msgID) opts.msgID = step.msgID;
  if (step.headers && Object.keys(step.headers).length > 0) {
    const h = natsHeaders();
    for (const [name, values] of Object.entries(step.headers)) {
      for (const v of values) h.append(name, v);
    }
    opts.headers = h;
  }
  if (step.expectStream) opts.expect = { streamName: step.expectStream };
  return opts;
}

async function main() {
  const plan = JSON.parse(await readStdin());
  if (!plan || typeof plan.servers !== "string" || !Array.isArray(plan.steps)) {
    throw new Error("plan: want {servers: string, steps: [...]}");
  }
  const nc = await connect({ servers: plan.servers, name: "queengate-jsclients-node" });
  const js = jetstream(nc);

  // outstanding: the async steps not yet waited for.
  let outstanding = [];
  const results = new Array(plan.steps.length);
  const publish = (i) => {
    const step = plan.steps[i];
    const data = Buffer.from(step.dataBase64 ?? "", "base64");
    return js.publish(step.subject, new Uint8Array(data), publishOpts(step)).then(
      (pa) => { results[i] = success(pa); },
      (err) => { results[i] = failure(err); },
    );
  };
  for (let i = 0; i < plan.steps.length; i++) {
    if (plan.steps[i].async) {
      outstanding.push(publish(i));
      continue;
    }
    await Promise.all(outstanding);
    outstanding = [];
    await publish(i);
  }
  await Promise.all(outstanding);
  await nc.close();

  process.stdout.write(results.map((r) => JSON.stringify(r) + "\n").join(""));
}

// On success the process ends by itself once the connection is closed,
// after stdout has drained. On failure exit() at once: a connection may
// still be open, and stderr is a pipe, written synchronously on Linux.
main().catch((err) => {
  process.stderr.write(`publish.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
