// Peer graphs for the HTTP load harness: the LangGraph JS equivalent of
// Cairn's benchmark assistant. Plain ESM, no LLM, no network.
//
//   bench: step1 -> step2 -> step3 -> step4 -> step5, each node appends one
//          message and sets count = i.
//   slow:  the same graph, but every node first sleeps SLOW_NODE_MS
//          (default 2000 ms), so a run lasts ~10 s; used by the SSE mode.
import {
  Annotation,
  END,
  START,
  StateGraph,
  messagesStateReducer,
} from "@langchain/langgraph";

const State = Annotation.Root({
  messages: Annotation({
    reducer: messagesStateReducer,
    default: () => [],
  }),
  count: Annotation({
    reducer: (_prev, next) => next,
    default: () => 0,
  }),
});

const STEPS = 5;

function build(delayMs) {
  const g = new StateGraph(State);
  for (let i = 1; i <= STEPS; i++) {
    g.addNode(`step${i}`, async () => {
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
      return {
        messages: [{ role: "assistant", content: `step ${i} done` }],
        count: i,
      };
    });
  }
  g.addEdge(START, "step1");
  for (let i = 1; i < STEPS; i++) g.addEdge(`step${i}`, `step${i + 1}`);
  g.addEdge(`step${STEPS}`, END);
  return g.compile();
}

const slowMs = Number.parseInt(process.env.SLOW_NODE_MS ?? "2000", 10);

export const bench = build(0);
export const slow = build(Number.isFinite(slowMs) ? slowMs : 2000);
