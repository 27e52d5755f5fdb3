package agentfile

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/store"
)

// MemorySpec is memory:, where the built-in memory tools (memory_put,
// memory_get, memory_search, memory_delete) keep what the agent
// remembers across threads: a namespace of the long-term memory store
// (store.ItemStore), in the tenant of the run's thread.
type MemorySpec struct {
	// Namespace is the namespace's labels. {agent} (the agent's name),
	// {thread} (the thread's id), {metadata.KEY} (the thread's metadata
	// KEY), {configurable.KEY} (the run's config.configurable KEY) and
	// {context.KEY} (the run's context KEY: flow.RunConfigOf), each a
	// string or a number, in a label are replaced when a tool runs;
	// periods in what replaces them become underscores, as labels cannot
	// hold periods.
	Namespace []string `yaml:"namespace"`
	// TTL is how many minutes an item memory_put writes lives after it
	// was last written or read (0: for ever).
	TTL float64 `yaml:"ttl"`
	// SearchLimit is the most items memory_search returns (default 5, at
	// most 50).
	SearchLimit int `yaml:"search_limit"`

	line    int   // the line of memory:
	nsLines []int // the line of each namespace label
}

// noteLines records the lines of memory: (key k, mapping v) and of its
// namespace labels.
func (m *MemorySpec) noteLines(k, v *yaml.Node) {
	m.line = k.Line + 1
	for i := 0; i+1 < len(v.Content); i += 2 {
		if v.Content[i].Value == "namespace" {
			for _, item := range v.Content[i+1].Content {
				m.nsLines = append(m.nsLines, item.Line+1)
			}
		}
	}
}

// The memory tools' names. They use no period, which model APIs refuse in
// tool names (and which tools: keeps for MCP servers' tools).
const (
	memoryPut    = "memory_put"
	memoryGet    = "memory_get"
	memorySearch = "memory_search"
	memoryDelete = "memory_delete"
)

// memoryTools build the memory tools of an agent file.
var memoryTools = map[string]func(a *File) (agent.Tool, error){
	memoryPut:    (*File).memoryPutTool,
	memoryGet:    (*File).memoryGetTool,
	memorySearch: (*File).memorySearchTool,
	memoryDelete: (*File).memoryDeleteTool,
}

// templateRE finds the {name} parts of a namespace label.
var templateRE = regexp.MustCompile(`\{([^{}]*)\}`)

var metadataKeyRE = regexp.MustCompile(`^(metadata|configurable|context)\.[A-Za-z0-9_-]+$`)

// checkMemory checks memory: and the memory tools tools: lists.
func (a *File) checkMemory() error {
	var listed []string
	for _, name := range a.Tools {
		if memoryTools[name] != nil {
			listed = append(listed, name)
		}
	}
	m := a.Memory
	switch {
	case len(listed) > 0 && len(m.Namespace) == 0:
		return &FileError{File: a.Path, Line: a.toolItemLine(slices.Index(a.Tools, listed[0])),
			Msg: fmt.Sprintf("tools: %s needs memory.namespace, the namespace it keeps items in (memory: {namespace: [memories, \"{agent}\"]})", listed[0])}
	case len(listed) == 0 && (len(m.Namespace) > 0 || m.TTL != 0 || m.SearchLimit != 0):
		return &FileError{File: a.Path, Line: m.line, Msg: "memory: is set but tools: lists no memory tool (memory_put, memory_get, memory_search, memory_delete)"}
	case m.TTL < 0:
		return &FileError{File: a.Path, Line: m.line, Msg: fmt.Sprintf("memory.ttl %g: want a positive number of minutes, or 0 for none", m.TTL)}
	case m.SearchLimit < 0 || m.SearchLimit > 50:
		return &FileError{File: a.Path, Line: m.line, Msg: fmt.Sprintf("memory.search_limit %d: want 1 to 50", m.SearchLimit)}
	}
	probe := make([]string, len(m.Namespace))
	for i, label := range m.Namespace {
		line := m.line
		if i < len(m.nsLines) {
			line = m.nsLines[i]
		}
		if err := checkLabel(label); err != nil {
			return &FileError{File: a.Path, Line: line, Msg: fmt.Sprintf("memory.namespace[%d] %q: %v", i, label, err)}
		}
		probe[i] = templateRE.ReplaceAllString(label, "x")
	}
	if err := store.ValidateItemNamespace(probe, "memory.namespace"); err != nil && len(probe) > 0 {
		return &FileError{File: a.Path, Line: m.line, Msg: err.Error()}
	}
	return nil
}

// checkLabel checks the {name} parts of a label and what is left.
func checkLabel(label string) error {
	for _, sub := range templateRE.FindAllStringSubmatch(label, -1) {
		if v := sub[1]; v != "agent" && v != "thread" && !metadataKeyRE.MatchString(v) {
			return fmt.Errorf("unknown {%s}: want {agent}, {thread}, {metadata.KEY}, {configurable.KEY} or {context.KEY}", v)
		}
	}
	rest := templateRE.ReplaceAllString(label, "")
	switch {
	case strings.ContainsAny(rest, "{}"):
		return fmt.Errorf("a { without its } (or the other way round)")
	case strings.Contains(rest, "."):
		return fmt.Errorf("labels cannot hold periods; make it two labels")
	}
	return nil
}

// memoryNamespace resolves memory.namespace for the running tool.
func (a *File) memoryNamespace(ctx context.Context) ([]string, error) {
	th, err := flow.Thread(ctx)
	if err != nil {
		return nil, err
	}
	ns := make([]string, len(a.Memory.Namespace))
	for i, label := range a.Memory.Namespace {
		var missing error
		ns[i] = templateRE.ReplaceAllStringFunc(label, func(m string) string {
			v, err := templateValue(ctx, m[1:len(m)-1], a.Name, th)
			if err != nil && missing == nil {
				missing = err
			}
			return strings.ReplaceAll(v, ".", "_")
		})
		if missing != nil {
			return nil, fmt.Errorf("memory.namespace[%d] %q: %w", i, label, missing)
		}
	}
	if err := store.ValidateItemNamespace(ns, "memory.namespace"); err != nil {
		return nil, err
	}
	return ns, nil
}

func templateValue(ctx context.Context, name, agentName string, th store.Thread) (string, error) {
	switch name {
	case "agent":
		return agentName, nil
	case "thread": // the tenant's own id: items are kept in the tenant's space already
		_, id := store.SplitThreadKey(th.ID)
		return id, nil
	}
	src, key, _ := strings.Cut(name, ".")
	var v any
	switch src {
	case "metadata":
		v = th.Metadata[key]
	case "configurable":
		v = flow.RunConfigOf(ctx).Configurable[key]
	case "context":
		var c map[string]any
		if raw := flow.RunConfigOf(ctx).Context; len(raw) > 0 {
			_ = json.Unmarshal(raw, &c) // an object: checked when the run was asked for
		}
		v = c[key]
	}
	if s, ok := labelText(v); ok {
		return s, nil
	}
	if src == "metadata" {
		return "", fmt.Errorf("thread %q has no metadata %s (a string or a number) to fill it", th.ID, key)
	}
	return "", fmt.Errorf("the run has no %s %s (a string or a number) to fill it", src, key)
}

// labelText is a template value as a label holds it: a string (not
// empty) or a number.
func labelText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, v != ""
	case json.Number:
		return v.String(), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}

// memoryStore is the run's item store and the agent's namespace.
func (a *File) memoryStore(ctx context.Context) (store.ItemStore, []string, error) {
	ns, err := a.memoryNamespace(ctx)
	if err != nil {
		return nil, nil, err
	}
	is, err := flow.Items(ctx)
	return is, ns, err
}

// memoryItem is an item as the memory tools show it to the model.
type memoryItem struct {
	Key       string         `json:"key"`
	Value     map[string]any `json:"value"`
	UpdatedAt string         `json:"updated_at"`
	Score     *float64       `json:"score,omitempty"`
}

func showItem(it store.Item) memoryItem {
	return memoryItem{Key: it.Key, Value: it.Value, UpdatedAt: it.UpdatedAt.UTC().Format(time.RFC3339), Score: it.Score}
}

func (a *File) memoryPutTool() (agent.Tool, error) {
	type args struct {
		Key   string         `json:"key" jsonschema:"the memory's key: writing a key again replaces what it held"`
		Value map[string]any `json:"value" jsonschema:"what to remember, a JSON object (a text field is what search matches best)"`
	}
	ttl := time.Duration(a.Memory.TTL * float64(time.Minute))
	return agent.NewTool(memoryPut, "Remember something across conversations: store a JSON object under a key in the agent's memory",
		func(ctx context.Context, _ agent.ToolContext, x args) (any, error) {
			is, ns, err := a.memoryStore(ctx)
			if err != nil {
				return nil, err
			}
			if x.Value == nil {
				return nil, fmt.Errorf("value: want a JSON object")
			}
			if err := is.Put(ctx, store.PutOp{Namespace: ns, Key: x.Key, Value: x.Value, TTL: ttl}); err != nil {
				return nil, err
			}
			return map[string]any{"stored": x.Key}, nil
		})
}

func (a *File) memoryGetTool() (agent.Tool, error) {
	type args struct {
		Key string `json:"key" jsonschema:"the memory's key"`
	}
	return agent.NewTool(memoryGet, "Recall the memory stored under a key (null when there is none)",
		func(ctx context.Context, _ agent.ToolContext, x args) (any, error) {
			is, ns, err := a.memoryStore(ctx)
			if err != nil {
				return nil, err
			}
			res, err := is.Batch(ctx, []store.ItemOp{store.GetOp{Namespace: ns, Key: x.Key}})
			if err != nil || res[0].Item == nil {
				return nil, err
			}
			return showItem(*res[0].Item), nil
		})
}

func (a *File) memorySearchTool() (agent.Tool, error) {
	type args struct {
		Query  string         `json:"query,omitempty" jsonschema:"words to look for (best matches first); empty: the newest memories"`
		Filter map[string]any `json:"filter,omitempty" jsonschema:"fields the memory's value must have, as {field: value} or {field: {\"$gt\": 3}} ($eq $ne $gt $gte $lt $lte)"`
	}
	limit := a.Memory.SearchLimit
	if limit == 0 {
		limit = 5
	}
	return agent.NewTool(memorySearch, fmt.Sprintf("Search the agent's memories (at most %d)", limit),
		func(ctx context.Context, _ agent.ToolContext, x args) (any, error) {
			is, ns, err := a.memoryStore(ctx)
			if err != nil {
				return nil, err
			}
			found, err := is.Search(ctx, store.SearchOp{Prefix: ns, Query: x.Query, Filter: x.Filter, Limit: limit})
			if err != nil {
				return nil, err
			}
			out := make([]memoryItem, len(found))
			for i, it := range found {
				out[i] = showItem(it)
			}
			return out, nil
		})
}

func (a *File) memoryDeleteTool() (agent.Tool, error) {
	type args struct {
		Key string `json:"key" jsonschema:"the memory's key"`
	}
	return agent.NewTool(memoryDelete, "Forget the memory stored under a key",
		func(ctx context.Context, _ agent.ToolContext, x args) (any, error) {
			is, ns, err := a.memoryStore(ctx)
			if err != nil {
				return nil, err
			}
			if err := is.Delete(ctx, store.DeleteOp{Namespace: ns, Key: x.Key}); err != nil {
				return nil, err
			}
			return map[string]any{"deleted": x.Key}, nil
		})
}
