package driver

import (
	"encoding/json"
)

// Write is a pending write: the update of one node of a step that has not
// committed yet (a parallel sibling failed or the process stopped). The
// runner re-applies pending writes on resume instead of re-running the node.
type Write struct {
	Task   string          // unique within the step, e.g. the node name and index
	Node   string          // the node that produced the update
	Update json.RawMessage // the node's update, as JSON
}
