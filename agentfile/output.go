package agentfile

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/store"
)

// handoff runs the next agent on the final output in its own namespace:
// resuming the run there when it holds this very input, else a new run.
func (p *prepared) handoff(ctx context.Context, cfg RunConfig, ns string, resume bool, out *Result) (*Result, error) {
	in := Input{Source: "handoff:" + p.a.Name, Kind: "json", Content: out.FinalOutput}
	if !out.Structured {
		in.Kind = "text"
	}
	cfg.Input = in
	nextNS := "handoff:" + ThreadID(p.next.a.Name)
	if ns != "" {
		nextNS = ns + "/" + nextNS
	}
	return p.next.run(ctx, cfg, nextNS, resume && handoffStarted(ctx, cfg.Store, cfg.Thread, nextNS, in))
}

// ErrNoOutput: a run stopped with success but its state has no final
// output (a fork of a checkpoint with nothing left to run).
var ErrNoOutput = errors.New("agentfile: no final output")

// handoffStarted reports whether the handoff namespace holds a run of this
// very input, to be resumed (finished or not). After a fork whose final
// output differs, the handoff starts a new run on the new input instead.
func handoffStarted(ctx context.Context, s store.Store, thread, ns string, in Input) bool {
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread, Namespace: ns})
	if err != nil {
		return false
	}
	var had Input
	if err := head.State.Get("input", &had); err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(had.Content, &a) != nil || json.Unmarshal(in.Content, &b) != nil {
		return false
	}
	return had.Source == in.Source && had.Kind == in.Kind && reflect.DeepEqual(a, b)
}

// writeOutput writes the final output inside the safe directory: indented
// JSON for structured output (without HTML escaping: the file is read by
// people), the raw text otherwise.
func (p *prepared) writeOutput(r *Result) error {
	var data []byte
	if r.Structured {
		var v any
		if err := json.Unmarshal(r.FinalOutput, &v); err != nil {
			return err
		}
		b, err := jsontext.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		data = append(b, '\n')
	} else {
		var s string
		if err := json.Unmarshal(r.FinalOutput, &s); err != nil {
			return err
		}
		data = []byte(s)
	}
	if err := p.conf.writeFile(p.a.Output.File, data); err != nil {
		return err
	}
	rel, _ := p.conf.rel(p.a.Output.File) // checked by writeFile
	r.OutputFile = p.conf.abs(rel)
	return nil
}
