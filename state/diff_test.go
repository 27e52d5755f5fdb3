package state

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name, a, b, want string
	}{
		{"same", `{"x":1,"l":[1,2]}`, `{"x":1,"l":[1,2]}`, `null`},
		{"replace", `{"x":1}`, `{"x":2}`, `[{"op":"replace","path":"/x","value":2}]`},
		{"add and remove", `{"a":1}`, `{"b":"~/"}`, `[{"op":"remove","path":"/a"},{"op":"add","path":"/b","value":"~/"}]`},
		{"list grows", `{"l":[1]}`, `{"l":[1,2,3]}`, `[{"op":"add","path":"/l/-","value":2},{"op":"add","path":"/l/-","value":3}]`},
		{"list shrinks", `{"l":[1,2,3]}`, `{"l":[9]}`, `[{"op":"replace","path":"/l/0","value":9},{"op":"remove","path":"/l/2"},{"op":"remove","path":"/l/1"}]`},
		{"nested", `{"m":{"k/1":{"v":true}}}`, `{"m":{"k/1":{"v":false}}}`, `[{"op":"replace","path":"/m/k~11/v","value":false}]`},
		{"type change", `{"m":{"a":1}}`, `{"m":[1]}`, `[{"op":"replace","path":"/m","value":[1]}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := mustDoc(t, c.a), mustDoc(t, c.b)
			p, err := Diff(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(p); string(got) != c.want {
				t.Fatalf("Diff = %s, want %s", got, c.want)
			}
			got, err := a.Apply(p)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(b) {
				t.Fatalf("applied: %s, want %s", got, b)
			}
		})
	}
	if _, err := DiffJSON([]byte(`{`), []byte(`{}`)); err == nil {
		t.Fatal("DiffJSON accepted bad JSON")
	}
}

func FuzzDiff(f *testing.F) {
	f.Add(`{"a":[1,{"b":2}],"c":"x"}`, `{"a":[{"b":3}],"d":null}`)
	f.Add(`{}`, `{"a":{"b":{"c":[]}}}`)
	f.Fuzz(func(t *testing.T, x, y string) {
		a, errA := ParseDoc([]byte(x))
		b, errB := ParseDoc([]byte(y))
		if errA != nil || errB != nil {
			return
		}
		p, err := Diff(a, b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Apply(p)
		if err != nil {
			t.Fatalf("apply %v: %v", p, err)
		}
		if !jsonEqual(got.AppendJSON(nil), b.AppendJSON(nil)) {
			t.Fatalf("applied: %s, want %s", got, b)
		}
	})
}

// Diff gives the RFC 6902 patch between two states, which turns the first
// into the second.
func ExampleDiff() {
	a, _ := ParseDoc([]byte(`{"topic": "tides", "notes": ["moon"]}`))
	b, _ := ParseDoc([]byte(`{"topic": "tides", "notes": ["moon", "sun"], "done": true}`))
	p, _ := Diff(a, b)
	out, _ := json.Marshal(p)
	fmt.Println(string(out))
	c, _ := a.Apply(p)
	fmt.Println(c.Equal(b))
	// Output:
	// [{"op":"add","path":"/done","value":true},{"op":"add","path":"/notes/-","value":"sun"}]
	// true
}
