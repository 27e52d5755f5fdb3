package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/state"
)

// Task describes what a loop agent should do (QitOS's Task).
type Task struct {
	ID              string         `json:"id"`
	Objective       string         `json:"objective"`
	Inputs          map[string]any `json:"inputs,omitempty"`
	Resources       []Resource     `json:"resources,omitempty"`
	Env             *EnvSpec       `json:"env_spec,omitempty"`
	Constraints     map[string]any `json:"constraints,omitempty"`
	SuccessCriteria []string       `json:"success_criteria,omitempty"`
	Budget          TaskBudget     `json:"budget,omitzero"`
	Metadata        map[string]any `json:"metadata,omitempty"`
}

// TaskBudget limits one task; fields left zero inherit the runner's budget.
type TaskBudget struct {
	MaxSteps          int     `json:"max_steps,omitempty"`
	MaxRuntimeSeconds float64 `json:"max_runtime_seconds,omitempty"`
	MaxTokens         int64   `json:"max_tokens,omitempty"`
}

func (b TaskBudget) flow() flow.Budget {
	return flow.Budget{MaxSteps: b.MaxSteps, MaxRuntime: time.Duration(b.MaxRuntimeSeconds * float64(time.Second)), MaxTokens: b.MaxTokens}
}

// EnvSpec declares the environment a task needs.
type EnvSpec struct {
	Type   string         `json:"type"`
	Config map[string]any `json:"config,omitempty"`
}

// Resource is a file, directory, URL or artifact a task depends on.
type Resource struct {
	Kind     string `json:"kind"` // file, dir, url, artifact
	Path     string `json:"path,omitempty"`
	URI      string `json:"uri,omitempty"`
	Required bool   `json:"required,omitempty"`
}

// TaskIssue is a pre-flight finding, with a QitOS-style code.
type TaskIssue struct {
	Code     string `json:"code"`
	Resource string `json:"resource,omitempty"`
	Message  string `json:"message"`
}

// Pre-flight codes.
const (
	CodeTaskInvalid       = "TASK_INVALID"
	CodeResourceMissing   = "TASK_RESOURCE_MISSING"
	CodeResourceKind      = "TASK_RESOURCE_KIND_INVALID"
	CodeResourceNotFile   = "TASK_RESOURCE_NOT_FILE"
	CodeResourceNotDir    = "TASK_RESOURCE_NOT_DIR"
	CodeResourceBadURL    = "TASK_RESOURCE_URL_INVALID"
	CodeEnvCapability     = "TASK_ENV_CAPABILITY_MISMATCH"
	CodeBudgetInvalid     = "TASK_BUDGET_INVALID"
	CodeResourceNoAddress = "TASK_RESOURCE_NO_LOCATION"
)

// Preflight checks a task before the loop starts: an id and an objective,
// a valid budget, resource kinds, and that required resources exist (files
// are files, directories are directories, URLs parse; URLs are not
// fetched). Optional resources are only checked for form.
func (t Task) Preflight() []TaskIssue {
	var issues []TaskIssue
	if t.ID == "" || t.Objective == "" {
		issues = append(issues, TaskIssue{Code: CodeTaskInvalid, Message: "a task needs an id and an objective"})
	}
	if t.Budget.MaxSteps < 0 || t.Budget.MaxRuntimeSeconds < 0 || t.Budget.MaxTokens < 0 {
		issues = append(issues, TaskIssue{Code: CodeBudgetInvalid, Message: "budget values must not be negative"})
	}
	for _, r := range t.Resources {
		loc := r.Path
		if loc == "" {
			loc = r.URI
		}
		switch r.Kind {
		case "file", "dir", "artifact":
			if r.Path == "" {
				issues = append(issues, TaskIssue{Code: CodeResourceNoAddress, Resource: loc, Message: r.Kind + " resource needs a path"})
				continue
			}
			if !r.Required {
				continue
			}
			fi, err := os.Stat(r.Path)
			switch {
			case err != nil:
				issues = append(issues, TaskIssue{Code: CodeResourceMissing, Resource: r.Path, Message: fmt.Sprintf("required %s %s does not exist", r.Kind, r.Path)})
			case r.Kind == "file" && !fi.Mode().IsRegular():
				issues = append(issues, TaskIssue{Code: CodeResourceNotFile, Resource: r.Path, Message: r.Path + " is not a regular file"})
			case r.Kind == "dir" && !fi.IsDir():
				issues = append(issues, TaskIssue{Code: CodeResourceNotDir, Resource: r.Path, Message: r.Path + " is not a directory"})
			}
		case "url":
			u, err := url.Parse(r.URI)
			if r.URI == "" || err != nil || u.Scheme == "" || u.Host == "" {
				issues = append(issues, TaskIssue{Code: CodeResourceBadURL, Resource: r.URI, Message: fmt.Sprintf("%q is not an absolute URL", r.URI)})
			}
		default:
			issues = append(issues, TaskIssue{Code: CodeResourceKind, Resource: loc, Message: fmt.Sprintf("unknown resource kind %q (file, dir, url, artifact)", r.Kind)})
		}
	}
	return issues
}

// Action is one tool action a decision asks for.
type Action struct {
	Name       string          `json:"name"`
	Args       json.RawMessage `json:"args,omitempty"`
	Timeout    time.Duration   `json:"timeout,omitempty"`
	MaxRetries int             `json:"max_retries,omitempty"`
	Idempotent bool            `json:"idempotent,omitempty"`
}

// ActionStatus is how an action ended.
type ActionStatus string

// Action statuses.
const (
	ActionSuccess   ActionStatus = "success"
	ActionError     ActionStatus = "error"
	ActionSkipped   ActionStatus = "skipped"
	ActionTimedOut  ActionStatus = "timed_out"
	ActionCancelled ActionStatus = "cancelled"
)

// ActionResult is an action's outcome.
type ActionResult struct {
	Name      string          `json:"name"`
	Status    ActionStatus    `json:"status"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	Attempts  int             `json:"attempts"`
	LatencyMS float64         `json:"latency_ms"`
}

// DecisionMode is what a decide step chose.
type DecisionMode string

// Decision modes.
const (
	ModeAct     DecisionMode = "act"
	ModeFinal   DecisionMode = "final"
	ModeWait    DecisionMode = "wait"
	ModeBranch  DecisionMode = "branch"
	ModeHandoff DecisionMode = "handoff"
)

// Decision is the output of one decide step. Build it with Act, Final,
// Wait, Branch or Handoff, which validate it.
type Decision struct {
	Mode       DecisionMode `json:"mode"`
	Actions    []Action     `json:"actions,omitempty"`
	Answer     string       `json:"final_answer,omitempty"`
	Rationale  string       `json:"rationale,omitempty"`
	Candidates []Decision   `json:"candidates,omitempty"`
	Target     string       `json:"handoff_to,omitempty"`
	WaitFor    string       `json:"wait_for,omitempty"`
}

// ErrInvalidDecision: a decision breaks its mode's rule.
var ErrInvalidDecision = errors.New("agent: invalid decision")

// Validate checks the decision's mode rules: act needs actions, final an
// answer, branch candidates, handoff a target.
func (d Decision) Validate() error {
	switch d.Mode {
	case ModeAct:
		if len(d.Actions) == 0 {
			return fmt.Errorf("%w: act needs at least one action", ErrInvalidDecision)
		}
		for i, a := range d.Actions {
			if a.Name == "" {
				return fmt.Errorf("%w: action %d has no name", ErrInvalidDecision, i)
			}
		}
	case ModeFinal:
		if d.Answer == "" {
			return fmt.Errorf("%w: final needs an answer", ErrInvalidDecision)
		}
	case ModeBranch:
		if len(d.Candidates) == 0 {
			return fmt.Errorf("%w: branch needs candidates", ErrInvalidDecision)
		}
		for i, c := range d.Candidates {
			if err := c.Validate(); err != nil {
				return fmt.Errorf("candidate %d: %w", i, err)
			}
		}
	case ModeHandoff:
		if d.Target == "" {
			return fmt.Errorf("%w: handoff needs a target agent", ErrInvalidDecision)
		}
	case ModeWait:
	default:
		return fmt.Errorf("%w: unknown mode %q", ErrInvalidDecision, d.Mode)
	}
	return nil
}

func validated(d Decision) (Decision, error) {
	if err := d.Validate(); err != nil {
		return Decision{}, err
	}
	return d, nil
}

// Act asks for tool actions.
func Act(rationale string, actions ...Action) (Decision, error) {
	return validated(Decision{Mode: ModeAct, Actions: actions, Rationale: rationale})
}

// Final gives the answer and ends the task.
func Final(answer string) (Decision, error) {
	return validated(Decision{Mode: ModeFinal, Answer: answer})
}

// Wait pauses for outside input (the run is interrupted until resumed).
func Wait(reason string) (Decision, error) {
	return validated(Decision{Mode: ModeWait, WaitFor: reason})
}

// Branch offers candidates; the loop agent's Select hook (default: the
// first) picks one.
func Branch(rationale string, candidates ...Decision) (Decision, error) {
	return validated(Decision{Mode: ModeBranch, Candidates: candidates, Rationale: rationale})
}

// Handoff passes the task to another agent and ends this one.
func Handoff(target, rationale string) (Decision, error) {
	return validated(Decision{Mode: ModeHandoff, Target: target, Rationale: rationale})
}

// runAction runs one action with a tool, honouring its timeout and retries.
func runAction(ctx context.Context, tools map[string]Tool, a Action, tc ToolContext) ActionResult {
	start := time.Now()
	res := ActionResult{Name: a.Name}
	t, ok := tools[a.Name]
	if !ok {
		res.Status, res.Error = ActionSkipped, fmt.Sprintf("%v %q", ErrUnknownTool, a.Name)
		return res
	}
	attempts := 1 + max(a.MaxRetries, 0)
	for i := 1; i <= attempts; i++ {
		res.Attempts = i
		actx, cancel := ctx, context.CancelFunc(func() {})
		if a.Timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, a.Timeout)
		}
		type out struct{ tr ToolResult }
		done := make(chan out, 1)
		go func() {
			done <- out{runTool(actx, map[string]Tool{t.Name: t}, ToolCall{ID: fmt.Sprintf("%s-%d", a.Name, i), Name: a.Name, Args: a.Args}, tc)}
		}()
		select {
		case o := <-done:
			cancel()
			if o.tr.Error == "" {
				res.Status, res.Output, res.Error = ActionSuccess, o.tr.Output, ""
				res.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
				return res
			}
			res.Status, res.Error = ActionError, o.tr.Error
		case <-actx.Done():
			cancel()
			if ctx.Err() != nil {
				res.Status, res.Error = ActionCancelled, ctx.Err().Error()
				res.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
				return res
			}
			res.Status, res.Error = ActionTimedOut, fmt.Sprintf("no result within %s", a.Timeout)
		}
	}
	res.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	return res
}

// stateBase reads the built-in fields of a state document.
func stateBase(d state.Doc) (state.Base, error) {
	var b state.Base
	for _, f := range []struct {
		name string
		out  any
	}{{"task", &b.Task}, {"current_step", &b.CurrentStep}, {"max_steps", &b.MaxSteps}, {"final_result", &b.FinalResult}, {"stop_reason", &b.StopReason}} {
		if d.Has(f.name) {
			if err := d.Get(f.name, f.out); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}
