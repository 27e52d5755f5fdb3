package state

import (
	"encoding/json"
	"sort"
	"sync"
)

// KVField is the field that holds the key-value section.
const KVField = "kv"

// KVSection declares the key-value section in a typed state; embed it.
type KVSection struct {
	KV map[string]json.RawMessage `json:"kv,omitempty" cairn:"merge"`
}

// KV is the key-value store of AgentKit over a state document: reads see the
// document plus the writes made so far; the writes become one update of the
// kv field (merge reducer), so they are committed with the step and
// checkpointed like the rest of the state. Safe for concurrent use by the
// tools of one step. Storing null deletes a key.
type KV struct {
	mu      sync.Mutex
	base    map[string]json.RawMessage
	pending map[string]json.RawMessage // nil value: deleted
}

// NewKV opens the key-value section of d.
func NewKV(d Doc) *KV {
	kv := &KV{pending: map[string]json.RawMessage{}}
	if v, ok := d.fields[KVField]; ok {
		if m, err := v.asObject(); err == nil {
			kv.base = m
		}
	}
	return kv
}

// Set stores a value under key.
func (kv *KV) Set(key string, v any) error {
	b, err := encodeValue(KVField+"/"+escapeToken(key), v)
	if err != nil {
		return err
	}
	if b, err = compact(b); err != nil {
		return &FieldError{Path: "/" + KVField + "/" + escapeToken(key), Err: err}
	}
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if string(b) == "null" {
		kv.pending[key] = nil
	} else {
		kv.pending[key] = b
	}
	return nil
}

// Delete removes key.
func (kv *KV) Delete(key string) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.pending[key] = nil
}

// Raw returns the JSON text stored under key.
func (kv *KV) Raw(key string) (json.RawMessage, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if v, ok := kv.pending[key]; ok {
		return v, v != nil
	}
	v, ok := kv.base[key]
	return v, ok
}

// Get decodes the value under key into out and reports whether it exists.
func (kv *KV) Get(key string, out any) (bool, error) {
	raw, ok := kv.Raw(key)
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return true, &FieldError{Path: "/" + KVField + "/" + escapeToken(key), Err: err}
	}
	return true, nil
}

// Has reports whether key exists.
func (kv *KV) Has(key string) bool { _, ok := kv.Raw(key); return ok }

// All returns every key and its JSON value.
func (kv *KV) All() map[string]json.RawMessage {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	out := make(map[string]json.RawMessage, len(kv.base)+len(kv.pending))
	for k, v := range kv.base {
		out[k] = v
	}
	for k, v := range kv.pending {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// Keys returns the keys, sorted.
func (kv *KV) Keys() []string {
	all := kv.All()
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Update returns the update that records the writes (nil when none).
func (kv *KV) Update() Update {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if len(kv.pending) == 0 {
		return nil
	}
	m := make(map[string]json.RawMessage, len(kv.pending))
	for k, v := range kv.pending {
		if v == nil {
			v = json.RawMessage("null")
		}
		m[k] = v
	}
	b, _ := json.Marshal(m) // raw messages of compact JSON always marshal
	return Update{KVField: json.RawMessage(b)}
}
