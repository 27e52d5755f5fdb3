package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model/scripted"
)

const summarySchema = `{"type":"object","properties":{"company_name":{"type":"string"},"location":{"type":"string"},"summary":{"type":"string","minLength":5}},"required":["company_name","location","summary"],"additionalProperties":false}`

func TestFirstJSONObject(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{`{"a":1}`, `{"a":1}`, nil},
		{`Sure! Here it is: {"a":{"b":"}"},"c":"x\"}"} — hope that helps {"d":2}`, `{"a":{"b":"}"},"c":"x\"}"}`, nil},
		{`no json here`, ``, agent.ErrNoJSON},
		{`start {"a": {"b": 1}`, ``, agent.ErrUnbalancedJSON},
		{`{"s":"\\"}`, `{"s":"\\"}`, nil},
	}
	for _, tc := range tests {
		got, err := agent.FirstJSONObject(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("FirstJSONObject(%q) = %q, %v", tc.in, got, err)
		}
	}
	if agent.ErrNoJSON.Error() != "No JSON object found in model output." || agent.ErrUnbalancedJSON.Error() != "Unbalanced JSON object in model output." {
		t.Fatal("error texts changed")
	}
}

func TestParseStructured(t *testing.T) {
	s, err := agent.SchemaFromJSON("BusinessSummary", []byte(summarySchema))
	if err != nil {
		t.Fatal(err)
	}
	good := `{"company_name":"Acme","location":"Berlin","summary":"Acme makes anvils."}`
	if v, err := agent.ParseStructured(s, good); err != nil || string(v) != good {
		t.Fatalf("whole reply: %s %v", v, err)
	}
	if v, err := agent.ParseStructured(s, "Here you go:\n```json\n"+good+"\n```"); err != nil || string(v) != good {
		t.Fatalf("embedded: %s %v", v, err)
	}
	_, err = agent.ParseStructured(s, `{"company_name":3,"location":"Berlin","summary":"no","extra":1}`)
	var se *agent.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, agent.ErrSchema) {
		t.Fatalf("invalid: %v", err)
	}
	paths := map[string]bool{}
	for _, is := range se.Issues {
		paths[is.Path] = true
	}
	if !paths["/company_name"] || !paths["/summary"] {
		t.Fatalf("issues %+v lack paths", se.Issues)
	}
	if _, err := agent.ParseStructured(s, "I cannot help with that."); !errors.Is(err, agent.ErrNoJSON) {
		t.Fatalf("no json: %v", err)
	}
	if _, err := agent.SchemaFromJSON("bad", []byte(`{"type":"nope"}`)); !errors.Is(err, agent.ErrInvalidSchema) {
		t.Fatalf("bad schema: %v", err)
	}
	ys, err := agent.SchemaFromYAML("inline", []byte("type: object\nrequired: [n]\nproperties:\n  n: {type: integer}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ys.Validate([]byte(`{"n":"x"}`)); err == nil || !strings.Contains(err.Error(), "/n") {
		t.Fatalf("yaml schema: %v", err)
	}
	type Summary struct {
		CompanyName string `json:"company_name"`
		Location    string `json:"location"`
	}
	gs, err := agent.SchemaFor[Summary]()
	if err != nil {
		t.Fatal(err)
	}
	if err := gs.Validate([]byte(`{"company_name":"a","location":"b"}`)); err != nil {
		t.Fatalf("go-type schema: %v", err)
	}
	if err := gs.Validate([]byte(`{"company_name":1,"location":"b"}`)); err == nil {
		t.Fatal("go-type schema accepted a number for a string")
	}
}

func TestGenerateStructuredReAsks(t *testing.T) {
	s, _ := agent.SchemaFromJSON("BusinessSummary", []byte(summarySchema))
	m, err := scripted.Parse("re-ask.yaml", []byte(`replies:
  - text: "The company is Acme."
  - json: {company_name: Acme, location: Berlin}
  - json: {company_name: Acme, location: Berlin, summary: "Acme makes anvils in Berlin."}
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := agent.GenerateStructured(context.Background(), m, agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Content: "summarise"}}}, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Responses) != 3 || !strings.Contains(string(res.Value), "anvils") {
		t.Fatalf("result %+v", res)
	}
	var sum agent.Usage
	for _, r := range res.Responses {
		sum = sum.Add(r.Usage)
	}
	if res.Usage != sum || res.Usage.Input == 0 {
		t.Fatalf("usage %+v, attempts sum %+v", res.Usage, sum)
	}
	// One attempt only: the error says why.
	m2, _ := scripted.Parse("once.yaml", []byte("replies:\n  - text: nope\n"))
	_, err = agent.GenerateStructured(context.Background(), m2, agent.Request{}, s, 1)
	if !errors.Is(err, agent.ErrNoJSON) {
		t.Fatalf("one attempt: %v", err)
	}
}
