package baserules

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// The built-in fields these rules read and write (state.Base).
const (
	fieldStopReason  = "stop_reason"
	fieldFinalResult = "final_result"
	fieldMaxSteps    = "max_steps"
	fieldCurrentStep = "current_step"
)

// Rules returns the rules of state.Base's built-in fields.
func Rules() flow.Rules {
	return flow.Rules{Stop: stop, AfterStep: countStep, Bounded: bounded, RecordStop: recordStop}
}

// recordStop writes a stop the runner decided into stop_reason (QitOS:
// "set by … the Engine on budget exhaustion"), unless the state says it
// already: the same stop_reason, or final_result for a final stop. With
// reason "" it clears a stop_reason that is set.
func recordStop(doc state.Doc, reason state.StopReason) state.Patch {
	raw, present := doc.Raw(fieldStopReason)
	var cur *string
	if present && json.Unmarshal(raw, &cur) != nil {
		cur = nil // not a string: replaced below, or left to Validate
	}
	switch {
	case reason == "" && cur == nil:
		return nil
	case reason == "":
		return state.Patch{{Op: state.OpReplace, Path: "/" + fieldStopReason, Value: json.RawMessage("null")}}
	case cur != nil && *cur == string(reason):
		return nil
	}
	if _, final := set(doc, fieldFinalResult); final && reason == state.StopFinal {
		return nil
	}
	op := state.OpReplace
	if !present {
		op = state.OpAdd
	}
	v, _ := json.Marshal(string(reason)) // a string always marshals
	return state.Patch{{Op: op, Path: "/" + fieldStopReason, Value: v}}
}

// stop stops a run whose state says it is done: a known stop_reason, a
// final_result, or (while anything is scheduled) current_step at max_steps.
func stop(doc state.Doc, p flow.Progress) (state.StopReason, bool) {
	if raw, ok := set(doc, fieldStopReason); ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if reason, err := state.ParseStopReason(s); err == nil {
				return reason, true
			}
		}
	}
	if _, ok := set(doc, fieldFinalResult); ok {
		return state.StopFinal, true
	}
	if p.Scheduled == 0 {
		return "", false
	}
	if limit, ok := intField(doc, fieldMaxSteps); ok && limit > 0 {
		// A missing current_step is 0; one that is not a number stops
		// nothing (it cannot be counted either).
		cur, ok := intField(doc, fieldCurrentStep)
		if _, present := doc.Raw(fieldCurrentStep); !present {
			cur, ok = 0, true
		}
		if ok && cur >= limit {
			return state.StopMaxSteps, true
		}
	}
	return "", false
}

// countStep adds one to current_step, unless a node of the step wrote it.
// A state with max_steps and no current_step starts counting at 0, so
// that max_steps always bounds it.
func countStep(doc state.Doc, patch state.Patch) state.Patch {
	if touches(patch, "/"+fieldCurrentStep) {
		return nil
	}
	op := state.OpReplace
	cur, ok := intField(doc, fieldCurrentStep)
	if _, present := doc.Raw(fieldCurrentStep); !present && bounded(doc) {
		op, ok = state.OpAdd, true
	}
	if !ok {
		return nil
	}
	return state.Patch{{Op: op, Path: "/" + fieldCurrentStep, Value: json.RawMessage(strconv.FormatInt(cur+1, 10))}}
}

// bounded reports whether the state has a step limit of its own.
func bounded(doc state.Doc) bool {
	limit, ok := intField(doc, fieldMaxSteps)
	return ok && limit > 0
}

// set returns a field's JSON when it is present and not null.
func set(doc state.Doc, field string) (json.RawMessage, bool) {
	raw, ok := doc.Raw(field)
	if !ok || raw == nil || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// intField reads an integer field.
func intField(doc state.Doc, field string) (int64, bool) {
	raw, ok := doc.Raw(field)
	if !ok {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}

// touches reports whether the patch writes path or below it.
func touches(p state.Patch, path string) bool {
	for _, op := range p {
		if op.Path == path || strings.HasPrefix(op.Path, path+"/") {
			return true
		}
	}
	return false
}
