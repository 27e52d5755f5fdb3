// Real LangGraph.js graphs on the Cairn saver, against a real cairn serve
// (CAIRN_URL): the W1 loop of the peer benchmark ends in the same state as
// on LangGraph's MemorySaver, a subgraph's checkpoints live in their own
// namespace, time travel forks, two writers conflict, threads copy and
// prune.
import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt, messagesStateReducer } from "@langchain/langgraph";
import { CairnConflictError, CairnSaver } from "../dist/index.js";

const url = process.env.CAIRN_URL;
if (!url) throw new Error("CAIRN_URL must name a running cairn serve");
const saver = () => new CairnSaver({ url, apiKey: process.env.CAIRN_API_KEY });
const run = `${process.pid}-${Date.now()}`;

// The W1 loop (see docs/langgraph-saver.md): one node appending a 200-byte
// message, counting and keeping the last content, S times.
const W1 = Annotation.Root({
  messages: Annotation({ reducer: messagesStateReducer, default: () => [] }),
  count: Annotation(),
  last: Annotation(),
});
function w1(checkpointer, S) {
  return new StateGraph(W1)
    .addNode("step", (state, config) => {
      const t = config.configurable.thread_id;
      const i = (state.count ?? 0) + 1;
      const content = `t${t}-step-${i}-`.padEnd(200, "x");
      return { messages: [{ id: `${t}-m${i}`, role: "assistant", content }], count: i, last: content };
    })
    .addEdge(START, "step")
    .addConditionalEdges("step", (s) => (s.count < S ? "step" : END), ["step", END])
    .compile({ checkpointer });
}

const plain = (snap) => JSON.parse(JSON.stringify({ values: snap.values, next: snap.next, metadata: snap.metadata }));

describe("a LangGraph graph on the Cairn saver", () => {
  it("runs the W1 loop to the same state and history as MemorySaver", async () => {
    const S = 30;
    const thread_id = `w1-${run}`;
    const cfg = { configurable: { thread_id }, recursionLimit: S + 10 };
    const [cairn, memory] = [w1(saver(), S), w1(new MemorySaver(), S)];
    const out = await cairn.invoke({ messages: [], count: 0, last: "" }, cfg);
    const ref = await memory.invoke({ messages: [], count: 0, last: "" }, cfg);
    expect(out.count).toBe(S);
    expect(JSON.parse(JSON.stringify(out))).toEqual(JSON.parse(JSON.stringify(ref)));
    // A new saver (another process) reads the same state back.
    const again = w1(saver(), S);
    expect(plain(await again.getState(cfg))).toEqual(plain(await memory.getState(cfg)));
    const hist = [];
    for await (const s of again.getStateHistory(cfg)) hist.push(plain(s));
    const refHist = [];
    for await (const s of memory.getStateHistory(cfg)) refHist.push(plain(s));
    expect(hist.length).toBe(S + 2);
    expect(hist).toEqual(refHist);
    // A second invoke goes on from the stored head.
    const more = await again.invoke({}, cfg);
    expect(more.count).toBe(S + 1);
    expect(more.messages.length).toBe(S + 1);
  });

  it("keeps a subgraph's checkpoints in their own namespace and resumes an interrupt", async () => {
    const Inner = Annotation.Root({ items: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
    const inner = new StateGraph(Inner)
      .addNode("ask", () => ({ items: [interrupt("which fruit?")] }))
      .addEdge(START, "ask")
      .addEdge("ask", END)
      .compile();
    const build = (checkpointer) =>
      new StateGraph(Inner)
        .addNode("before", () => ({ items: ["start"] }))
        .addNode("inner", inner)
        .addEdge(START, "before")
        .addEdge("before", "inner")
        .addEdge("inner", END)
        .compile({ checkpointer });
    const outer = build(saver());
    const cfg = { configurable: { thread_id: `sub-${run}` } };
    const ref = build(new MemorySaver());
    await ref.invoke({ items: [] }, cfg);
    const refOut = await ref.invoke(new Command({ resume: "fig" }), cfg);
    await outer.invoke({ items: [] }, cfg);
    const paused = await outer.getState(cfg, { subgraphs: true });
    expect(paused.next).toEqual(["inner"]);
    expect(paused.tasks[0].interrupts[0].value).toBe("which fruit?");
    const sub = paused.tasks[0].state;
    expect(sub.config.configurable.checkpoint_ns).toMatch(/^inner:/);
    // Another process answers the interrupt.
    const resumed = await build(saver()).invoke(new Command({ resume: "fig" }), cfg);
    expect(resumed.items).toContain("fig");
    expect(resumed).toEqual(refOut);
    const nss = new Set();
    for await (const t of saver().list({ configurable: { thread_id: `sub-${run}` } })) nss.add(t.config.configurable.checkpoint_ns);
    expect([...nss].some((ns) => ns.startsWith("inner:"))).toBe(true);
    expect(nss.has("")).toBe(true);
  });

  it("forks on time travel, and refuses a second writer on the same head", async () => {
    const S = 3;
    const thread_id = `fork-${run}`;
    const cfg = { configurable: { thread_id }, recursionLimit: 20 };
    const g = w1(saver(), S);
    await g.invoke({ messages: [], count: 0, last: "" }, cfg);
    const hist = [];
    for await (const s of g.getStateHistory(cfg)) hist.push(s);
    const old = hist.find((s) => s.values.count === 1);
    // Time travel: update the state at an old checkpoint; a branch.
    const branch = await g.updateState(old.config, { last: "edited" });
    const head = await g.getState(cfg);
    expect(head.config.configurable.checkpoint_id).toBe(branch.configurable.checkpoint_id);
    expect(head.values.count).toBe(1);
    expect(head.values.last).toBe("edited");
    expect(head.values.messages.length).toBe(1);

    // Two workers read the head; the first puts, the second is refused.
    const [a, b] = [saver(), saver()];
    const ta = await a.getTuple({ configurable: { thread_id } });
    const tb = await b.getTuple({ configurable: { thread_id } });
    const next = (t, id) => ({ ...t.checkpoint, id, channel_values: { ...t.checkpoint.channel_values, last: id } });
    const ids = ["1f0c0000-0000-6000-8000-00000000000a", "1f0c0000-0000-6000-8000-00000000000b"];
    // Reads LangGraph makes on its own (DeltaChannel's history walk, by id)
    // do not let a put branch.
    await b.getDeltaChannelHistory({ config: tb.config, channels: ["messages"] });
    await a.put(ta.config, next(ta, ids[0]), { source: "loop", step: 9, parents: {} }, { last: 9 });
    await expect(b.put(tb.config, next(tb, ids[1]), { source: "loop", step: 9, parents: {} }, { last: 9 })).rejects.toBeInstanceOf(CairnConflictError);
    expect((await saver().getTuple({ configurable: { thread_id } })).checkpoint.id).toBe(ids[0]);
  });

  it("copies and prunes threads", async () => {
    const S = 60; // long enough for a snapshot: what it replaces can go
    const s = saver();
    const thread_id = `copy-${run}`;
    const cfg = { configurable: { thread_id }, recursionLimit: S + 10 };
    await w1(s, S).invoke({ messages: [], count: 0, last: "" }, cfg);
    const target = `${thread_id}-copy`;
    await s.copyThread(thread_id, target);
    const copied = await w1(s, S).getState({ configurable: { thread_id: target } });
    const orig = await w1(s, S).getState(cfg);
    expect(plain(copied).values).toEqual(plain(orig).values);
    await expect(s.copyThread(thread_id, target)).rejects.toBeInstanceOf(CairnConflictError);

    const res = await s.prune([thread_id], { keepLast: 1 });
    expect(res.checkpoints).toBeGreaterThan(0);
    const after = await w1(s, S).getState(cfg);
    expect(plain(after).values).toEqual(plain(orig).values);
    let n = 0;
    for await (const _ of s.list({ configurable: { thread_id, checkpoint_ns: "" } })) n++;
    expect(n).toBeLessThan(S + 2);
    // The pruned thread goes on.
    const more = await w1(s, S + 2).invoke({}, cfg);
    expect(more.messages.length).toBe(S + 2);

    await s.prune([target], { strategy: "delete" });
    expect(await s.getTuple({ configurable: { thread_id: target } })).toBeUndefined();
  });
});
