package agent

import "context"

// RunTool runs one tool call as RunTools runs each of a model's calls:
// the arguments checked against the tool's schema, tc handed to the
// handler as it is (its Key names the call), and every failure — an
// unknown tool, bad arguments, an error, a panic, a result that does not
// encode — in the result's Error, for the model to read. For a program
// that runs a reply's tool calls itself, such as a chat agent file's
// tools node.
func RunTool(ctx context.Context, tools []Tool, call ToolCall, tc ToolContext) ToolResult {
	byName := make(map[string]Tool, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
	}
	return runToolRecorded(ctx, byName, call, tc)
}
