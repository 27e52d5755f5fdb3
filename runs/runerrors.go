package runs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// A failed run's error is told as LangGraph tells it (its serializeError):
// the error's name — a node's own error's, not the wrapping that says which
// node failed — and its own message. The checkpoint of the failed step
// keeps the whole text (which node, which task, how many attempts).

// ErrorNamer is an error that names itself for a failed run's error event
// ({"error": name, "message": …}); other errors are named by their Go
// type, and the standard library's (errors.New, fmt.Errorf) "Error".
type ErrorNamer interface {
	ErrorName() string
}

// errorOf is a failed run's error kind and message. A node's message is
// taken from the whole error's text, after the node error's context: the
// run redacted that text with its own redactor (an agent file's secret
// patterns), which the node's error inside it has not been.
func errorOf(err error) (kind, msg string) {
	full := err.Error()
	if ne, ok := errors.AsType[*flow.NodeError](err); ok && ne.Err != nil {
		if i := strings.LastIndex(full, ne.Context()+": "); i >= 0 {
			return errorName(ne.Err), full[i+len(ne.Context())+2:]
		}
		return errorName(ne.Err), full
	}
	return errorType(err), full
}

// errorName names a node's error: the first in its chain that names
// itself (ErrorNamer) or has a type of its own, else "Error".
func errorName(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if n, ok := e.(ErrorNamer); ok {
			return n.ErrorName()
		}
		t := reflect.TypeOf(e)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Name() != "" && !stdPackages[t.PkgPath()] {
			return t.Name()
		}
	}
	return "Error"
}

// stdPackages hold the errors a node makes without a type of its own.
var stdPackages = map[string]bool{"errors": true, "fmt": true, "": true}

// errorType names an error the run itself failed with (not a node's).
func errorType(err error) string {
	switch {
	case errors.Is(err, flow.ErrNodeFailed):
		return "NodeError"
	case errors.Is(err, store.ErrConflict):
		return "ConflictError"
	case errors.Is(err, context.DeadlineExceeded):
		return "TimeoutError"
	case invalidKind(err), refused(err):
		return "ValueError"
	}
	return "RunError"
}

// recursionError is the error of a run that reached its recursion limit
// after steps steps: LangGraph fails such a run (GraphRecursionError).
func recursionError(steps int) (kind, msg string) {
	return "GraphRecursionError", fmt.Sprintf("Recursion limit of %d reached without hitting a stop condition. You can increase the limit by setting the \"recursion_limit\" config key.", steps)
}
