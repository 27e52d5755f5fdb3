// Package agent is the LLM side of Cairn: the Model interface and its
// messages, tool calls and inference results; structured output validated
// against JSON Schema (with the first-balanced-object fallback and re-asks);
// typed tools that read and write the run's state; the tool loop; AgentKit's
// networks of agents chosen by a router; and QitOS's decide/act/reduce loop
// agent over tasks.
//
// Providers live in subpackages (model/scripted, model/openai,
// model/anthropic), all behind Model, all returning the typed errors of
// this package so retries and messages are the same whatever the provider
// (a prompt over the context window is ErrContextOverflow). An API key never
// appears in an error, a log line or the state.
//
// # Loop agents
//
// Each iteration (prepare, decide, act, reduce) is one committed step. The
// run stops, in QitOS's order, on: a final decision (final); critics after
// reduce (critic_stop); ShouldStop (its reason, agent_condition for a
// handoff); the environment's terminal state (env_terminal); stagnation
// (no change of the state's signature for Stagnation steps); budgets and
// max_steps; a model's context overflow (context_overflow). A stop the
// runner decides (a budget, max_steps, ShouldStop) is put on record in
// the state's stop_reason by a checkpoint of its own (flow's stops on
// record); a Resume with a larger budget clears it and goes on. Every hook and
// criterion applies after a Resume as in the first run; budgets and the
// stagnation count continue across resumes. A task that fails pre-flight
// (QitOS's TASK_* codes) runs no step and ends with task_validation_failed
// and final_result "Preflight validation failed.". TaskResult.Success is
// QitOS's: success, final, env_terminal or agent_condition. Each step's
// observation, decision, actions, results, tool invocations and critic
// outputs go into its checkpoint (StepRecordKey), from which trace.Export
// writes QitOS's steps.jsonl rows; the task's id and metadata go into the
// run's input checkpoint (TaskRecordKey), from which it writes the
// manifest's task_id and metadata.
//
// # Idempotency keys
//
// A tool call's key is the step's task key (flow.RunInfo.Key) followed by
// "/tool/<round>.<index>", its position in the step, so it is the same
// when the step runs again after a crash even though a provider gives the
// calls new ids.
//
// # Networks
//
// Routers and lifecycle hooks see a NetworkView whose KV they may write;
// the writes are committed with the step, as AgentKit's network.state.kv.
// InferenceResult.Prompt is the turn's whole initial message list.
package agent
