// LangGraph's own conformance suite for checkpointers
// (@langchain/langgraph-checkpoint-validation) against a real cairn serve
// (CAIRN_URL; go test ./cmd/cairn -run LangGraphSaver starts one).
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import { CairnSaver } from "../dist/index.js";

const url = process.env.CAIRN_URL;
if (!url) throw new Error("CAIRN_URL must name a running cairn serve");

// Each checkpointer starts on an empty tenant: what the previous one wrote
// is deleted when it is destroyed.
const initializer = {
  checkpointerName: "@cairn-dev/langgraph-checkpoint-cairn",
  createCheckpointer() {
    return new CairnSaver({ url, apiKey: process.env.CAIRN_API_KEY });
  },
  async destroyCheckpointer(saver) {
    const threads = new Set();
    for await (const t of saver.list({ configurable: {} })) threads.add(t.config.configurable.thread_id);
    for (const t of threads) await saver.deleteThread(t);
  },
};

validate(initializer);
// The opt-in cases of the suite: DeltaChannel's history walk over the
// saver's stored writes (LangGraph's own savers run them too).
describe("delta channel history", () => deltaChannelHistoryTests(initializer));
