import { defineConfig } from "vitest/config";

// The conformance suite of @langchain/langgraph-checkpoint-validation calls
// describe/it/expect as globals.
export default defineConfig({
  test: {
    globals: true,
    include: ["test/**/*.test.mjs"],
    testTimeout: 60000,
    hookTimeout: 60000,
    fileParallelism: false,
  },
});
