package state

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// FuzzPatchApply checks Cairn's patch replay against the reference RFC 6902
// implementation: whatever Cairn accepts, the reference must produce the
// same document.
func FuzzPatchApply(f *testing.F) {
	f.Add(`{"a":[1,2],"o":{"k":1}}`, `[{"op":"add","path":"/a/-","value":3}]`)
	f.Add(`{"a":[1,2],"o":{"k":1}}`, `[{"op":"remove","path":"/o/k"},{"op":"replace","path":"/a/0","value":{"x":[]}}]`)
	f.Add(`{"m":[{"id":"a"}]}`, `[{"op":"add","path":"/m/0/id","value":"b"},{"op":"test","path":"/m/0/id","value":"b"}]`)
	f.Add(`{"a":{"b":{"c":[]}}}`, `[{"op":"move","from":"/a/b","path":"/z"},{"op":"copy","from":"/z","path":"/a/y"}]`)
	f.Fuzz(func(t *testing.T, docJSON, patchJSON string) {
		d, err := ParseDoc([]byte(docJSON))
		if err != nil {
			return
		}
		p, err := ParsePatch([]byte(patchJSON))
		if err != nil {
			return
		}
		before := d.String()
		got, err := d.Apply(p)
		if d.String() != before {
			t.Fatalf("apply changed its input")
		}
		if err != nil {
			return
		}
		checkListBytes(t, got)
		if hasEmptyToken(p) {
			return // the reference mishandles "" members (RFC 6901 allows them); TestPatchApply covers ours
		}
		pj, _ := json.Marshal(p)
		lp, err := jsonpatch.DecodePatch(pj)
		if err != nil {
			t.Fatalf("reference rejects a patch Cairn applied: %s: %v", pj, err)
		}
		ref, err := lp.Apply([]byte(before))
		if err != nil {
			t.Fatalf("reference fails where Cairn succeeded: doc %s patch %s: %v (Cairn: %s)", before, pj, err, got)
		}
		refDoc, err := ParseDoc(ref)
		if err != nil {
			return // the reference may turn the root into a non-object
		}
		if !refDoc.Equal(got) {
			t.Fatalf("doc %s patch %s: Cairn %s, reference %s", before, pj, got, ref)
		}
		// The binary forms round-trip.
		if rp, err := DecodePatch(EncodePatch(nil, p), true); err != nil || len(rp) != len(p) {
			t.Fatalf("patch codec: %v", err)
		}
		if rd, err := DecodeDoc(EncodeDoc(nil, got), true); err != nil || !rd.Equal(got) {
			t.Fatalf("doc codec: %v", err)
		}
	})
}

// checkListBytes fails unless every list of d knows its elements' total
// length (Footprint reads it).
func checkListBytes(t *testing.T, d Doc) {
	t.Helper()
	for name, v := range d.fields {
		if v.list != nil && v.list.bytes != itemBytes(v.list.items) {
			t.Fatalf("list %q: %d bytes recorded, %d held", name, v.list.bytes, itemBytes(v.list.items))
		}
	}
}

// FuzzDecodeDoc feeds damaged binary documents to the decoder: errors, never
// panics, and what decodes re-encodes to itself.
func FuzzDecodeDoc(f *testing.F) {
	schema := MustSchema(WithField("m", ReducerMessages), WithField("kv", ReducerMerge))
	d, _, _ := schema.Apply(mustDoc(f, `{"s":"x","n":1}`), Update{"m": Message{ID: "1"}, "kv": map[string]int{"a": 1}})
	f.Add(EncodeDoc(nil, d))
	f.Add(EncodeDoc(nil, EmptyDoc()))
	f.Add([]byte{1, 1, 1, 'a', 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeDoc(data, true)
		if err != nil {
			return
		}
		again, err := DecodeDoc(EncodeDoc(nil, d), true)
		if err != nil || again.String() != d.String() {
			t.Fatalf("re-encode: %v", err)
		}
		if !json.Valid(d.AppendJSON(nil)) {
			t.Fatalf("decoded document is not valid JSON: %s", d)
		}
	})
}

// FuzzDecodePatch does the same for binary patches.
func FuzzDecodePatch(f *testing.F) {
	f.Add(EncodePatch(nil, Patch{{Op: OpAdd, Path: "/a/-", Value: json.RawMessage(`{"x":1}`)}, {Op: OpRemove, Path: "/b"}}))
	f.Add(EncodePatch(nil, Patch{{Op: OpMove, From: "/a", Path: "/b"}}))
	f.Add([]byte{1, 1, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePatch(data, true)
		if err != nil {
			return
		}
		if _, err := DecodePatch(EncodePatch(nil, p), true); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		_, _ = EmptyDoc().Apply(p)
	})
}

// FuzzParseDoc checks that any JSON text either parses into a document that
// encodes to valid JSON, or fails with ErrInvalidDoc.
func FuzzParseDoc(f *testing.F) {
	f.Add(`{"a":[1,{"b":"c"}],"n":1e400}`)
	f.Add(`{"a":"\u00e9\ud800"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDoc([]byte(s))
		if err != nil {
			return
		}
		if !json.Valid(d.AppendJSON(nil)) {
			t.Fatalf("%q parsed to invalid JSON %s", s, d)
		}
		// The streamed text is the same bytes.
		var streamed bytes.Buffer
		if n, err := d.WriteJSON(&streamed); err != nil || n != int64(streamed.Len()) || !bytes.Equal(streamed.Bytes(), d.AppendJSON(nil)) {
			t.Fatalf("%q: WriteJSON wrote %q (%d, %v), AppendJSON %s", s, streamed.Bytes(), n, err, d)
		}
	})
}

func hasEmptyToken(p Patch) bool {
	for _, op := range p {
		for _, ptr := range []string{op.Path, op.From} {
			if strings.Contains(ptr, "//") || strings.HasSuffix(ptr, "/") {
				return true
			}
		}
	}
	return false
}

// FuzzScanMembers checks the fast member scanner against encoding/json.
func FuzzScanMembers(f *testing.F) {
	f.Add(`{"id":"a","type":"remove"}`)
	f.Add(`{"content":"x\"}","id":"b","n":[1,{"id":"no"}]}`)
	f.Add(`{"id":null}`)
	f.Add(`{"i\u0064":"esc"}`)
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			return
		}
		raw := buf.Bytes()
		want, wantErr := readHeadExact(raw)
		got, err := readHead(raw)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: err %v, encoding/json %v", raw, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.Type != want.Type || (got.ID == nil) != (want.ID == nil) || (got.ID != nil && *got.ID != *want.ID) {
			t.Fatalf("%s: got %+v, encoding/json %+v", raw, got, want)
		}
	})
}

// FuzzAppendCommon checks that the update values encoded without
// reflection come out byte for byte as encoding/json writes them.
func FuzzAppendCommon(f *testing.F) {
	f.Add("id-1", "assistant", "hello <world> & \"you\"\n", "", int64(-7), true)
	f.Add("\xff\xfe", "\u2028", "tab\there", "n", int64(1)<<62, false)
	f.Add("", "", "", "", int64(0), false)
	f.Fuzz(func(t *testing.T, id, role, content, name string, n int64, flag bool) {
		msg := Message{ID: id, Role: role, Content: content, Name: name, ToolCallID: name, Type: role}
		for _, v := range []any{nil, id, content, int(n), n, flag, msg, []Message{msg, {Content: id}}, []Message{}, []Message(nil)} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := appendCommon(nil, v)
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("%#v: got %q (%v), encoding/json %q", v, got, ok, want)
			}
		}
		if _, ok := appendCommon(nil, Message{ToolCalls: json.RawMessage(`[ ]`)}); ok {
			t.Fatal("a message with tool calls was encoded without encoding/json")
		}
	})
}
