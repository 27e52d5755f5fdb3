// Peer graphs for the HTTP load harness: the LangGraph JS equivalent of
// Cairn's benchmark assistant. Plain ESM, no LLM, no network.
//
//   bench: step1 -> step2 -> step3 -> step4 -> step5, each node appends one
//          message and sets count = i.
//   slow:  the same graph, but every node first sleeps SLOW_NODE_MS
//          (default 2000 ms), so a run lasts ~10 s; used by the SSE mode.
//   chat:  workload W3's chat assistant (cairn bench w3 --url ... --assistant
//          chat): state {messages} under the messages reducer
//          (MessagesAnnotation); one node, agent, answers the newest human
//          message with one AI message "You said: <text>. " right-padded
//          with x to 200 bytes, as Cairn's Go graph (internal/bench/chat.go).
import { AIMessage } from "@langchain/core/messages";
import {
  Annotation,
  END,
  MessagesAnnotation,
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

// W3's answer to a human message: "You said: <text>. " right-padded with x
// to 200 bytes (longer texts are not cut).
const ANSWER_BYTES = 200;
function answer(text) {
  const s = `You said: ${text}. `;
  return s.length >= ANSWER_BYTES ? s : s + "x".repeat(ANSWER_BYTES - s.length);
}

function isHuman(m) {
  const type = typeof m.getType === "function" ? m.getType() : m._getType?.();
  return type === "human";
}

function buildChat() {
  const g = new StateGraph(MessagesAnnotation);
  g.addNode("agent", async (state) => {
    const msgs = state.messages;
    for (let i = msgs.length - 1; i >= 0; i--) {
      if (!isHuman(msgs[i])) continue;
      const c = msgs[i].content;
      const text = typeof c === "string" ? c : JSON.stringify(c);
      return { messages: [new AIMessage(answer(text))] };
    }
    throw new Error("chat: no human message to answer");
  });
  g.addEdge(START, "agent");
  g.addEdge("agent", END);
  return g.compile();
}

export const chat = buildChat();
