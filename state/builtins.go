package state

import (
	"fmt"
	"slices"
)

// StopReason says why a run ended (the QitOS set).
type StopReason string

// The known stop reasons.
const (
	StopSuccess               StopReason = "success"
	StopFinal                 StopReason = "final"
	StopMaxSteps              StopReason = "max_steps"
	StopBudgetSteps           StopReason = "budget_steps"
	StopBudgetTime            StopReason = "budget_time"
	StopBudgetTokens          StopReason = "budget_tokens"
	StopContextOverflow       StopReason = "context_overflow"
	StopAgentCondition        StopReason = "agent_condition"
	StopCriticStop            StopReason = "critic_stop"
	StopStagnation            StopReason = "stagnation"
	StopEnvTerminal           StopReason = "env_terminal"
	StopTaskValidationFailed  StopReason = "task_validation_failed"
	StopEnvCapabilityMismatch StopReason = "env_capability_mismatch"
	StopUnrecoverableError    StopReason = "unrecoverable_error"
	StopCancelledImmediate    StopReason = "cancelled_immediate"
	StopInterrupt             StopReason = "interrupt"
	// StopRecursionLimit: a run reached the runner's step limit (default
	// 25 per run, as LangGraph's recursion limit).
	StopRecursionLimit StopReason = "recursion_limit"
)

// StopReasons lists every known stop reason.
func StopReasons() []StopReason {
	return []StopReason{StopSuccess, StopFinal, StopMaxSteps, StopBudgetSteps, StopBudgetTime,
		StopBudgetTokens, StopContextOverflow, StopAgentCondition, StopCriticStop, StopStagnation,
		StopEnvTerminal, StopTaskValidationFailed, StopEnvCapabilityMismatch, StopUnrecoverableError,
		StopCancelledImmediate, StopInterrupt, StopRecursionLimit}
}

// Valid reports whether r is a known stop reason.
func (r StopReason) Valid() bool { return slices.Contains(StopReasons(), r) }

// ParseStopReason checks a stop reason's name.
func ParseStopReason(s string) (StopReason, error) {
	r := StopReason(s)
	if !r.Valid() {
		return "", fmt.Errorf("%w: %q", ErrUnknownStopReason, s)
	}
	return r, nil
}

// Base holds the built-in fields every typed state has (QitOS's
// StateSchema). Embed it in a state struct.
type Base struct {
	SchemaVersion int            `json:"schema_version"`
	Task          string         `json:"task"`
	CurrentStep   int            `json:"current_step"`
	MaxSteps      int            `json:"max_steps"`
	FinalResult   *string        `json:"final_result"`
	StopReason    *StopReason    `json:"stop_reason"`
	Metadata      map[string]any `json:"metadata,omitempty" cairn:"merge"`
	Metrics       map[string]any `json:"metrics,omitempty" cairn:"merge"`
}

// NewBase returns built-ins for a task with a step limit.
func NewBase(task string, maxSteps int) Base {
	return Base{SchemaVersion: 1, Task: task, MaxSteps: maxSteps}
}

// Validate checks the built-in rules: current_step ≥ 0, max_steps > 0,
// current_step ≤ max_steps, and a known stop reason.
func (b *Base) Validate() error {
	switch {
	case b.CurrentStep < 0:
		return &FieldError{Path: "/current_step", Err: fmt.Errorf("%w: %d is negative", ErrInvalidState, b.CurrentStep)}
	case b.MaxSteps <= 0:
		return &FieldError{Path: "/max_steps", Err: fmt.Errorf("%w: %d must be greater than 0", ErrInvalidState, b.MaxSteps)}
	case b.CurrentStep > b.MaxSteps:
		return &FieldError{Path: "/current_step", Err: fmt.Errorf("%w: %d is past max_steps %d", ErrInvalidState, b.CurrentStep, b.MaxSteps)}
	case b.StopReason != nil && !b.StopReason.Valid():
		return &FieldError{Path: "/stop_reason", Err: fmt.Errorf("%w: %q", ErrUnknownStopReason, *b.StopReason)}
	}
	return nil
}

// SetStop records why the run stops, and optionally its final result.
// Unknown reasons are rejected and change nothing.
func (b *Base) SetStop(reason StopReason, finalResult ...string) error {
	if !reason.Valid() {
		return fmt.Errorf("%w: %q", ErrUnknownStopReason, reason)
	}
	b.StopReason = &reason
	if len(finalResult) > 0 {
		fr := finalResult[0]
		b.FinalResult = &fr
	}
	return nil
}

// Stopped reports whether a stop reason or a final result is set.
func (b *Base) Stopped() bool { return b.StopReason != nil || b.FinalResult != nil }

// StopUpdate returns the update that records a stop in a document state,
// checking the reason like SetStop.
func StopUpdate(reason StopReason, finalResult ...string) (Update, error) {
	if !reason.Valid() {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStopReason, reason)
	}
	u := Update{"stop_reason": reason}
	if len(finalResult) > 0 {
		u["final_result"] = finalResult[0]
	}
	return u, nil
}
