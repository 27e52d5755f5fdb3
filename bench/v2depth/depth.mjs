// The thread-centric protocol at depth: one thread, N turns of the chat
// agent file beside this script, each a run.start command then the
// thread's event stream read from the last seq seen (since) until the
// run's end; prints the median turn of the first and the last tenth.
//
//   cairn serve --addr 127.0.0.1:8932 --assistants bench/v2depth --store sqlite:/tmp/d.db &
//   node bench/v2depth/depth.mjs http://127.0.0.1:8932 1000 lifecycle,messages
//
// Node's built-ins only (fetch): no npm install.
const [api, turnsArg, channelsArg] = process.argv.slice(2);
if (!api || !turnsArg) throw new Error("usage: node depth.mjs URL TURNS [CHANNELS, comma-separated; default lifecycle,messages]");
const turns = Number(turnsArg);
const channels = (channelsArg || "lifecycle,messages").split(",");
const thread = `depth-${Date.now()}`;

async function post(path, body) {
  const res = await fetch(api + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res;
}

// turn sends one turn and reads its events up to the run's end; it
// returns the last seq read.
async function turn(i, since) {
  const start = await (await post(`/threads/${thread}/commands`, { id: i + 1, method: "run.start", params: { assistant_id: "chat", input: { messages: [{ type: "human", content: `turn ${i}` }] } } })).json();
  if (start.type !== "success") throw new Error(JSON.stringify(start));
  const ac = new AbortController();
  const res = await fetch(`${api}/threads/${thread}/stream/events`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channels, since }), signal: ac.signal });
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.startsWith("data: ")) continue;
      const ev = JSON.parse(line.slice(6));
      since = ev.seq;
      if (ev.method === "lifecycle" && ev.params.namespace.length === 0 && ["completed", "failed", "interrupted"].includes(ev.params.data.event)) {
        ac.abort();
        return since;
      }
    }
  }
  throw new Error(`turn ${i}: the stream ended before the run did`);
}

const ms = [];
let since = 0;
for (let i = 0; i < turns; i++) {
  const t0 = performance.now();
  since = await turn(i, since).catch((e) => (e.name === "AbortError" ? since : Promise.reject(e)));
  ms.push(performance.now() - t0);
}
const k = Math.max(1, Math.floor(turns / 10));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const first = median(ms.slice(0, k));
const last = median(ms.slice(-k));
console.log(JSON.stringify({ turns, channels, first10pct_median_ms: +first.toFixed(2), last10pct_median_ms: +last.toFixed(2), last_over_first: +(last / first).toFixed(2) }));
