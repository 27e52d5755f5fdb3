// Package baserules gives the built-in fields of state.Base their meaning
// on flow's runner, through the runner's extension points (flow.Rules):
//
//   - a stop_reason set in the state stops the run with that reason (an
//     unknown reason is ignored), and a final_result set stops it with
//     reason "final";
//   - while anything is scheduled, a run whose current_step has reached
//     max_steps stops with reason "max_steps";
//   - every committed step adds one to current_step, unless a node of the
//     step set it itself (a state with max_steps and no current_step
//     starts counting at 0);
//   - a state with max_steps > 0 bounds its runs, so the runner's default
//     step limit (flow.DefaultRecursionLimit) yields to it;
//   - a stop the state does not say yet — a budget (budget_steps,
//     budget_time, budget_tokens), max_steps, a stop criterion such as a
//     loop agent's ShouldStop — is written into stop_reason by the
//     checkpoint the runner records it with (flow.Rules.RecordStop), as
//     QitOS's Engine sets it; final_result is left as it is. What goes
//     on from that checkpoint (a resume with a larger budget, an update,
//     a fork) clears it again.
//
// The runner itself knows none of these fields: a graph whose state
// embeds state.Base opts in with Graph.WithRules(baserules.Rules()), as
// agent.LoopAgent's graphs do.
package baserules
