package flow

import (
	"strconv"

	"github.com/cairn-dev/cairn/store"
)

// taskKeys returns the idempotency keys of a step's tasks:
// "thread/seq/node" in the root namespace, "thread/ns/seq/node" in others.
func taskKeys(thread, ns string, readSeq int64, tasks []store.Task) []string {
	if len(tasks) == 1 {
		return []string{keyPrefix(thread, ns, readSeq) + tasks[0].Node}
	}
	count := map[string]int{}
	for _, t := range tasks {
		count[t.Node]++
	}
	keys := make([]string, len(tasks))
	seen := map[string]int{}
	prefix := keyPrefix(thread, ns, readSeq)
	for i, t := range tasks {
		k := prefix + t.Node
		if count[t.Node] > 1 {
			k += "#" + strconv.Itoa(seen[t.Node])
			seen[t.Node]++
		}
		keys[i] = k
	}
	return keys
}

// keyPrefix is "thread/seq/", or "thread/ns/seq/" in a namespace.
func keyPrefix(thread, ns string, seq int64) string {
	if ns != "" {
		return thread + "/" + ns + "/" + strconv.FormatInt(seq, 10) + "/"
	}
	return thread + "/" + strconv.FormatInt(seq, 10) + "/"
}

// idGen returns a deterministic message-id generator for one task.
func idGen(key string) func() string {
	n := 0
	return func() string {
		n++
		return key + "/" + strconv.Itoa(n)
	}
}
