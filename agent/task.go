package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
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

// TaskIssue is a pre-flight finding (QitOS's TaskValidationIssue).
type TaskIssue struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field is where the issue is, as QitOS names it ("id",
	// "budget.max_steps", "resources[2].path").
	Field string `json:"field"`
	// Resource is the resource's path or URI, for resource issues.
	Resource string         `json:"resource,omitempty"`
	Details  map[string]any `json:"details,omitempty"`
}

// Pre-flight codes: QitOS's names, and three of Cairn's own for checks
// QitOS does not make (a file that is not a regular file, a directory that
// is not one, a URL that is not absolute). QitOS's writability checks
// (TASK_RESOURCE_NOT_WRITABLE, TASK_RESOURCE_PARENT_NOT_WRITABLE) apply
// to its workspaces, which Cairn does not have.
const (
	CodeIDInvalid              = "TASK_ID_INVALID"
	CodeObjectiveInvalid       = "TASK_OBJECTIVE_INVALID"
	CodeBudgetStepsInvalid     = "TASK_BUDGET_STEPS_INVALID"
	CodeBudgetRuntimeInvalid   = "TASK_BUDGET_RUNTIME_INVALID"
	CodeBudgetTokensInvalid    = "TASK_BUDGET_TOKENS_INVALID"
	CodeEnvSpecInvalid         = "TASK_ENV_SPEC_INVALID"
	CodeResourceKindInvalid    = "TASK_RESOURCE_KIND_INVALID"
	CodeResourceLocatorMissing = "TASK_RESOURCE_LOCATOR_MISSING"
	CodeResourceMissing        = "TASK_RESOURCE_MISSING"
	CodeResourceNotFile        = "TASK_RESOURCE_NOT_FILE"
	CodeResourceNotDir         = "TASK_RESOURCE_NOT_DIR"
	CodeResourceURLInvalid     = "TASK_RESOURCE_URL_INVALID"
)

// Preflight checks a task before the loop starts, in QitOS's order: the
// id and objective, the budget (a field set must be positive; zero means
// unset and inherits the runner's budget), the environment spec, then
// each resource's kind and locator, and that required resources exist
// (files are files, directories are directories, URLs are absolute; URLs
// are not fetched). Optional resources are only checked for form.
func (t Task) Preflight() []TaskIssue {
	var issues []TaskIssue
	add := func(code, field, msg string, details map[string]any) {
		issues = append(issues, TaskIssue{Code: code, Field: field, Message: msg, Details: details})
	}
	if strings.TrimSpace(t.ID) == "" {
		add(CodeIDInvalid, "id", "Task.id must be a non-empty string", nil)
	}
	if strings.TrimSpace(t.Objective) == "" {
		add(CodeObjectiveInvalid, "objective", "Task.objective must be a non-empty string", nil)
	}
	if t.Budget.MaxSteps < 0 {
		add(CodeBudgetStepsInvalid, "budget.max_steps", "Task budget max_steps must be > 0", map[string]any{"value": t.Budget.MaxSteps})
	}
	if t.Budget.MaxRuntimeSeconds < 0 || math.IsNaN(t.Budget.MaxRuntimeSeconds) {
		add(CodeBudgetRuntimeInvalid, "budget.max_runtime_seconds", "Task budget max_runtime_seconds must be > 0", map[string]any{"value": t.Budget.MaxRuntimeSeconds})
	}
	if t.Budget.MaxTokens < 0 {
		add(CodeBudgetTokensInvalid, "budget.max_tokens", "Task budget max_tokens must be > 0", map[string]any{"value": t.Budget.MaxTokens})
	}
	if t.Env != nil && strings.TrimSpace(t.Env.Type) == "" {
		add(CodeEnvSpecInvalid, "env_spec.type", "env_spec.type must be a non-empty string", nil)
	}
	for i, r := range t.Resources {
		issues = append(issues, r.check(i)...)
	}
	return issues
}

// check returns the issues of resource i.
func (r Resource) check(i int) []TaskIssue {
	var issues []TaskIssue
	loc := r.Path
	if loc == "" {
		loc = r.URI
	}
	add := func(code, field, msg string) {
		issues = append(issues, TaskIssue{Code: code, Field: fmt.Sprintf("resources[%d]%s", i, field), Resource: loc, Message: msg})
	}
	switch r.Kind {
	case "file", "dir", "url", "artifact":
	default:
		add(CodeResourceKindInvalid, ".kind", "Unsupported TaskResource.kind: "+r.Kind)
	}
	if loc == "" {
		add(CodeResourceLocatorMissing, "", "TaskResource requires path or uri")
		return issues
	}
	if r.Kind == "url" || (r.Path == "" && r.URI != "") {
		u, err := url.Parse(r.URI)
		if r.Kind == "url" && (err != nil || u.Scheme == "" || u.Host == "") {
			add(CodeResourceURLInvalid, ".uri", fmt.Sprintf("%q is not an absolute URL", r.URI))
		}
		return issues
	}
	if !r.Required {
		return issues
	}
	fi, err := os.Stat(r.Path)
	switch {
	case err != nil:
		add(CodeResourceMissing, ".path", "Required resource does not exist: "+r.Path)
	case r.Kind == "file" && !fi.Mode().IsRegular():
		add(CodeResourceNotFile, ".path", r.Path+" is not a regular file")
	case r.Kind == "dir" && !fi.IsDir():
		add(CodeResourceNotDir, ".path", r.Path+" is not a directory")
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

// runAction runs one action with a tool, honouring its timeout and
// retries; every attempt has the same key (tc's).
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
