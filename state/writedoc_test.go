package state

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestWriteDoc: WriteDoc writes what EncodeDoc encodes, a piece at a time,
// for documents small and large (lists past a chunk, objects, scalars).
func TestWriteDoc(t *testing.T) {
	big := make([]any, 3000)
	for i := range big {
		big[i] = map[string]any{"id": fmt.Sprint(i), "content": strings.Repeat("x", 200)}
	}
	for _, tc := range []struct {
		name string
		json string
	}{
		{"empty", `{}`},
		{"scalars", `{"a":1,"b":"two","c":null}`},
		{"object", `{"kv":{"k1":1,"k2":[1,2]}}`},
		{"one huge value", `{"v":"` + strings.Repeat("y", 3*docChunk) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDoc([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			checkWriteDoc(t, d)
		})
	}
	t.Run("long list", func(t *testing.T) {
		d, _, err := MustSchema(WithField("messages", ReducerAppend)).Apply(Doc{}, Update{"messages": big, "count": 3000})
		if err != nil {
			t.Fatal(err)
		}
		checkWriteDoc(t, d)
	})
}

func checkWriteDoc(t *testing.T, d Doc) {
	t.Helper()
	var buf bytes.Buffer
	n, err := WriteDoc(&buf, d)
	if err != nil || n != int64(buf.Len()) || buf.Len() != EncodedDocSize(d) {
		t.Fatalf("WriteDoc: %d bytes, %v; buffer %d, EncodeDoc %d", n, err, buf.Len(), EncodedDocSize(d))
	}
	got, err := DecodeDoc(buf.Bytes(), true)
	if err != nil || got.String() != d.String() {
		t.Fatalf("decode: %v", err)
	}
}

// TestWriteJSON: the streamed JSON text is AppendJSON's, for a document
// larger than a chunk and for small ones of every form.
func TestWriteJSON(t *testing.T) {
	s := MustSchema(WithField("messages", ReducerMessages))
	msgs := make([]Message, 2000)
	for i := range msgs {
		msgs[i] = Message{ID: "m" + strconv.Itoa(i), Role: "user", Content: strings.Repeat("y", 100)}
	}
	big, _, err := s.Apply(EmptyDoc(), Update{"messages": msgs, "n": 1, "o": map[string]any{"b": 1, "a": []int{2}}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ParseDoc([]byte(`{"a":"x","b":null,"c":[],"d":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		doc  Doc
	}{{"empty", EmptyDoc()}, {"large", big}, {"raw values", raw}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := tc.doc.WriteJSON(&buf)
			if err != nil || n != int64(buf.Len()) {
				t.Fatalf("WriteJSON: %d bytes, %v (buffer %d)", n, err, buf.Len())
			}
			if want := tc.doc.AppendJSON(nil); !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("WriteJSON differs from AppendJSON:\n%.200s\n%.200s", buf.Bytes(), want)
			}
		})
	}
}
