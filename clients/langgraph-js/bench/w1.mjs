// W1 of the LangGraph.js peer benchmark (one node appending a 200-byte
// message S times, a durable checkpoint after every step) on a chosen
// saver; prints one JSON line. Build first (npm run build).
//
//   node bench/w1.mjs --saver cairn --url http://127.0.0.1:8123 --steps 1000 [--db serve.db]
//   node bench/w1.mjs --saver sqlite --steps 1000      (needs: npm install --no-save @langchain/langgraph-checkpoint-sqlite)
//   node bench/w1.mjs --saver memory --steps 1000
//
// --state messages (LangGraph's messages reducer, the default), plain
// (objects and concat) or delta (the beta DeltaChannel); --thread ID;
// --history 0 skips reading the whole history, --history-budget-s N stops
// it after N seconds; --db names the SQLite file
// whose size (with its WAL) is reported.
import { createHash } from "node:crypto";
import fs from "node:fs";
import { performance } from "node:perf_hooks";
import { Annotation, DeltaChannel, END, MemorySaver, START, StateGraph, messagesDeltaReducer, messagesStateReducer } from "@langchain/langgraph";
import { CairnSaver } from "../dist/index.js";

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a.startsWith("--")) args[a.slice(2)] = process.argv[i + 1] && !process.argv[i + 1].startsWith("--") ? process.argv[++i] : "1";
}
const S = parseInt(args.steps ?? "100", 10);
const saverKind = args.saver ?? "cairn";
const stateKind = args.state ?? "messages";
const thread = args.thread ?? "0";

function channel() {
  if (stateKind === "messages") return Annotation({ reducer: messagesStateReducer, default: () => [] });
  if (stateKind === "plain") return Annotation({ reducer: (a, b) => a.concat(b), default: () => [] });
  if (stateKind === "delta") return new DeltaChannel(messagesDeltaReducer);
  throw new Error(`unknown --state ${stateKind}`);
}
const State = Annotation.Root({ messages: channel(), count: Annotation(), last: Annotation() });

async function makeSaver() {
  if (saverKind === "cairn") {
    if (!args.url) throw new Error("--url (the address of cairn serve) is required with --saver cairn");
    return new CairnSaver({ url: args.url, apiKey: process.env.CAIRN_API_KEY });
  }
  if (saverKind === "memory") return new MemorySaver();
  if (saverKind === "sqlite") {
    const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
    const s = SqliteSaver.fromConnString(args.db ?? `./w1-${process.pid}.db`);
    return s;
  }
  throw new Error(`unknown --saver ${saverKind}`);
}

const size = (p) => (p && fs.existsSync(p) ? fs.statSync(p).size : 0);

const saver = await makeSaver();
const graph = new StateGraph(State)
  .addNode("step", (state, config) => {
    const t = config.configurable.thread_id;
    const i = (state.count ?? 0) + 1;
    const content = `t${t}-step-${i}-`.padEnd(200, "x");
    return { messages: [{ id: `${t}-m${i}`, role: "assistant", content }], count: i, last: content };
  })
  .addEdge(START, "step")
  .addConditionalEdges("step", (s) => (s.count < S ? "step" : END), ["step", END])
  .compile({ checkpointer: saver });

const cfg = { configurable: { thread_id: thread }, recursionLimit: S + 10, durability: args.durability ?? "sync" };
const t0 = performance.now();
const out = await graph.invoke({ messages: [], count: 0, last: "" }, cfg);
const total = performance.now() - t0;
if (out.count !== S || out.messages.length !== S) throw new Error(`bad final state: count=${out.count} messages=${out.messages.length}`);

const res = { saver: saverKind, state: stateKind, steps: S, total_ms: +total.toFixed(1), us_per_step: +((total * 1000) / S).toFixed(1) };
let t = performance.now();
const snap = await graph.getState({ configurable: { thread_id: thread } });
res.get_state_ms = +(performance.now() - t).toFixed(2);
if (snap.values.count !== S || snap.values.messages.length !== S) throw new Error("getState mismatch");
// The final state, serialized: equal hashes mean equal states across savers.
res.final_state_sha256 = createHash("sha256").update(JSON.stringify(snap.values)).digest("hex");
if (args.history !== "0") {
  t = performance.now();
  let n = 0;
  const budget = parseFloat(args["history-budget-s"] ?? "0") * 1000;
  res.history_complete = true;
  for await (const s of graph.getStateHistory({ configurable: { thread_id: thread } })) {
    if (s.values == null) throw new Error("history item without values");
    n++;
    if (budget > 0 && performance.now() - t > budget) {
      res.history_complete = false;
      break;
    }
  }
  res.history_ms = +(performance.now() - t).toFixed(1);
  res.history_items = n;
}
if (args.db) res.db_plus_wal_bytes = size(args.db) + size(`${args.db}-wal`);
process.stdout.write(JSON.stringify(res) + "\n");
