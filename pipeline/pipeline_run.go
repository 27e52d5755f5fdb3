package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/model"
	"github.com/cairn-dev/cairn/redact"
	"github.com/cairn-dev/cairn/state"
	"github.com/cairn-dev/cairn/store"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// GateStep is a gate written in Go: it gets the previous gate's output (or
// the pipeline's request) and returns its own output.
type GateStep func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// Config says where and how a pipeline runs.
type Config struct {
	Store    store.Store
	Thread   string
	Model    agent.Model // overrides every gate agent's model
	Steps    map[string]GateStep
	Observer func(flow.Event)
	Getenv   func(string) string
	// Models and Tools are handed to every gate's agent file (see
	// agentfile.RunConfig).
	Models *model.Registry
	Tools  []agent.Tool
	// Stream and Logger: see agentfile.RunConfig.
	Stream         []flow.StreamMode
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Warn receives warnings (a previous gate's output unusable).
	Warn func(string)
	// OnGate is called after a gate's outcome is committed and its files
	// written: SUCCESS, PARTIAL or FAILED, with the step's duration.
	OnGate func(GateReport)
	// Answer answers the pause before an approval gate when the pipeline
	// resumes: a flow.Approval (a rejection marks the pipeline FAILED),
	// or nil to go on.
	Answer any
}

// GateReport is a gate's committed outcome.
type GateReport struct {
	File     GateFile
	Seq      int64 // the checkpoint that records it
	Duration time.Duration
}

// Result is how a pipeline run ended.
type Result struct {
	Thread   string
	Result   flow.Result
	Pipeline File
	Gates    map[int]GateFile
	// Dir is the folder of the thread's gate and pipeline files.
	Dir string
}

// ErrFinished: the pipeline on this thread has run all its gates;
// a new run needs a new thread (or a fork of this one).
var ErrFinished = errors.New("pipeline: pipeline finished")

// FinishedError says a thread's pipeline is done, and how.
type FinishedError struct {
	Thread string
	Status string
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("pipeline thread %q is finished (%s)", e.Thread, e.Status)
}

// Unwrap returns ErrFinished.
func (e *FinishedError) Unwrap() error { return ErrFinished }

var pipelineSchema = state.MustSchema(
	state.WithField("pipeline", state.ReducerReplace),
	state.WithField("gates", state.ReducerMerge),
	state.WithField("agents", state.ReducerReplace),
)

// Check verifies, before anything is stored, that every gate can run: the
// state_dir (created if missing), each agent file, its handoffs, schemas,
// script, model and API key, and each Go step. Errors are *agentfile.FileError naming the file and line.
func (p *Pipeline) Check(cfg Config) error {
	if err := os.MkdirAll(p.BaseStateDir(), 0o755); err != nil {
		return &agentfile.FileError{File: p.Path, Msg: fmt.Sprintf("state_dir: %v", err), Err: err}
	}
	for _, g := range p.Gates {
		if g.Step != "" {
			if cfg.Steps[g.Step] == nil {
				return &agentfile.FileError{File: p.Path, Line: g.line, Msg: fmt.Sprintf("gate %d: no registered step %q", g.Gate, g.Step)}
			}
			continue
		}
		af, err := agentfile.Load(p.rel(g.Agent))
		if err != nil {
			return &agentfile.FileError{File: p.Path, Line: g.line, Msg: fmt.Sprintf("gate %d: %v", g.Gate, err), Err: err}
		}
		if af.IsChat() {
			return &agentfile.FileError{File: p.Path, Line: g.line, Msg: fmt.Sprintf("gate %d: %s is a chat (kind: chat), which keeps a thread's conversation; a gate runs a chain", g.Gate, g.Agent)}
		}
		if err := agentfile.Check(af, p.agentConfig(cfg, g.Gate, nil)); err != nil {
			return &agentfile.FileError{File: p.Path, Line: g.line, Msg: fmt.Sprintf("gate %d: %v", g.Gate, err), Err: err}
		}
	}
	return nil
}

// agentConfig is how a gate's agent file runs: in the pipeline's folder,
// with the pipeline's secrets redacted.
func (p *Pipeline) agentConfig(cfg Config, gate int, in json.RawMessage) agentfile.RunConfig {
	return agentfile.RunConfig{Store: cfg.Store, Thread: cfg.Thread, Model: cfg.Model, Observer: cfg.Observer, Getenv: cfg.Getenv, Models: cfg.Models, Tools: cfg.Tools, Stream: cfg.Stream, Logger: cfg.Logger, TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
		AllowedRoot: filepath.Dir(p.Path), Redact: p.redactor,
		Input: agentfile.Input{Source: gateNode(gate) + "-input", Kind: "json", Content: in}}
}

// Run runs a pipeline on a thread: a new thread starts at the first
// gate; a thread that stopped (a failed gate, a crash) or a fork resumes,
// and only gates not completed run; a finished one is refused with
// ErrFinished. The whole pipeline is checked first (Check): a bad
// file stores nothing. The gate and pipeline files in StateDirOf(thread)
// are written after each commit, from the committed state. Everything
// stored, written, shown or returned is redacted with the file's secrets.
func Run(ctx context.Context, p *Pipeline, cfg Config) (*Result, error) {
	res, err := runPipeline(ctx, p, cfg)
	return res, p.redactor.Error(err)
}

func runPipeline(ctx context.Context, p *Pipeline, cfg Config) (*Result, error) {
	if err := p.Check(cfg); err != nil {
		return nil, err
	}
	models := cfg.Models
	if models == nil {
		models = model.Defaults()
	}
	red, err := p.runRedactor(cfg.Getenv, models)
	if err != nil {
		return nil, err
	}
	run := *p // this run's copy, redacting what its gate agents add
	run.redactor = red
	res, err := run.run(ctx, cfg)
	return res, red.Error(err)
}

// runRedactor is what a run redacts: the pipeline's secrets, the secrets of
// every gate's agent file, and the values of their API key variables.
func (p *Pipeline) runRedactor(getenv func(string) string, models *model.Registry) (*redact.Redactor, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	rc := p.Secrets.RedactConfig()
	var keys []string
	for _, g := range p.Gates {
		if g.Agent == "" {
			continue
		}
		af, err := agentfile.Load(p.rel(g.Agent))
		if err != nil {
			return nil, &agentfile.FileError{File: p.Path, Line: g.line, Msg: fmt.Sprintf("gate %d: %v", g.Gate, err), Err: err}
		}
		rc.Keys = append(rc.Keys, af.Secrets.Keys...)
		rc.Patterns = append(rc.Patterns, af.Secrets.Patterns...)
		if env := models.KeyEnv(model.Config{Provider: af.Model.Provider, APIKeyEnv: af.Model.APIKeyEnv}); env != "" {
			keys = append(keys, getenv(env))
		}
	}
	r, err := redact.New(rc)
	if err != nil {
		return nil, &agentfile.FileError{File: p.Path, Msg: "secrets: " + err.Error(), Err: err}
	}
	return r.WithSecrets(keys...), nil
}

// run runs the pipeline on cfg.Thread: it starts a new thread, resumes an
// unfinished one, and refuses a finished one. The run stops at the first
// write of the files that fails (ErrFiles): no later gate runs while the
// files lag behind the store.
func (p *Pipeline) run(ctx context.Context, cfg Config) (*Result, error) {
	head, err := cfg.Store.Load(ctx, store.LoadRequest{Thread: cfg.Thread})
	fresh := errors.Is(err, store.ErrNotFound)
	if err != nil && !fresh {
		return nil, err
	}
	if !fresh {
		if st, done := Finished(head); done {
			return nil, &FinishedError{Thread: cfg.Thread, Status: st}
		}
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	fw := &fileWriter{p: p, s: cfg.Store, thread: cfg.Thread, onGate: cfg.OnGate, stop: stop}
	r, err := p.runner(context.WithoutCancel(ctx), cfg, fw)
	if err != nil {
		return nil, err
	}
	var res flow.Result
	if fresh {
		res, err = r.Invoke(runCtx, cfg.Thread, p.startUpdate())
	} else {
		res, err = r.Resume(runCtx, cfg.Thread, rejection(head, cfg.Answer))
	}
	if errors.Is(err, store.ErrConflict) {
		err = fmt.Errorf("pipeline thread %q: another run wrote it first, nothing of this step was committed: %w", cfg.Thread, err)
	}
	return p.result(ctx, cfg, res), fw.finish(context.WithoutCancel(ctx), err, context.Cause(runCtx))
}

// runner is the flow runner of the pipeline's gates, its observer writing
// the files after each commit.
func (p *Pipeline) runner(bg context.Context, cfg Config, fw *fileWriter) (*flow.Runner, error) {
	obs := func(e flow.Event) {
		if cfg.Observer != nil {
			cfg.Observer(e)
		}
		fw.observe(bg, e)
	}
	g, err := p.compile(cfg)
	if err != nil {
		return nil, err
	}
	// A pipeline is a line of gates, it cannot loop: no step limit.
	return flow.NewRunner(g, cfg.Store, flow.Options{Observer: obs, Redact: p.redactor, RecursionLimit: -1, Logger: cfg.Logger, TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
		InterruptBefore: p.approvalGates()})
}

// approvalGates are the nodes of the gates that wait for a person.
func (p *Pipeline) approvalGates() []string {
	var out []string
	for _, g := range p.Gates {
		if g.Approval {
			out = append(out, gateNode(g.Gate))
		}
	}
	return out
}

// rejection completes a rejecting answer: the pipeline file says FAILED,
// with the gate it stopped before as the current gate.
func rejection(head store.Checkpoint, answer any) any {
	a, ok := answer.(flow.Approval)
	if !ok || a.Action != flow.ApprovalReject || len(a.Value) > 0 {
		return answer
	}
	var pf File
	if head.State.Get("pipeline", &pf) != nil {
		return answer
	}
	pf.Status = GateFailed
	if n, ok := gateOfNode(interruptedNode(head)); ok {
		pf.CurrentGate = n
	}
	a.Value, _ = json.Marshal(map[string]File{"pipeline": pf}) // a pipeline file always marshals
	return a
}

// interruptedNode is the node a pause stopped before.
func interruptedNode(head store.Checkpoint) string {
	return pausedNode(head.Meta.Interrupt)
}

// pausedNode is the node of a pause's payload.
func pausedNode(payload json.RawMessage) string {
	var p struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.Node
}

// WaitingAt reports the gate the run stopped before to wait for approval
// (approval: true): Run again with Config.Answer (or none) to go on.
func (r *Result) WaitingAt() (gate int, ok bool) {
	if r == nil || r.Result.StopReason != state.StopInterrupt {
		return 0, false
	}
	return gateOfNode(pausedNode(r.Result.Interrupt))
}

// Waiting reports the gate a pipeline thread's head waits before for
// approval.
func Waiting(head store.Checkpoint) (gate int, ok bool) {
	if head.Status != store.StatusInterrupted && (head.Meta.StopReason != string(state.StopInterrupt) || len(head.Meta.Interrupt) == 0) {
		return 0, false // neither an interrupt nor a commit that paused before its next gate
	}
	return gateOfNode(interruptedNode(head))
}

// Finished reports whether a pipeline thread's head ends the
// pipeline, and its final status.
func Finished(head store.Checkpoint) (string, bool) {
	if head.Status != store.StatusSuccess || len(head.Meta.Next) > 0 || len(head.Meta.Tasks) > 0 {
		return "", false
	}
	var pf File
	if !head.State.Has("pipeline") || head.State.Get("pipeline", &pf) != nil {
		return "", false
	}
	return pf.Status, pf.Status != PipelineInProgress
}

// startUpdate is a new thread's first state: the pipeline file as the seed
// creates it, and the gates' agent names.
func (p *Pipeline) startUpdate() state.Update {
	names := map[string]string{}
	for _, g := range p.Gates {
		names[strconv.Itoa(g.Gate)] = g.Name
	}
	pf := File{Status: PipelineInProgress, CurrentGate: p.Gates[0].Gate, CompletedGates: []int{}, Metadata: p.sanitizedMetadata()}
	return state.Update{"pipeline": pf, "agents": names}
}

// result reads the run's outcome from the committed head.
func (p *Pipeline) result(ctx context.Context, cfg Config, res flow.Result) *Result {
	out := &Result{Thread: cfg.Thread, Result: res, Gates: map[int]GateFile{}, Dir: p.StateDirOf(cfg.Thread)}
	head, err := cfg.Store.Load(context.WithoutCancel(ctx), store.LoadRequest{Thread: cfg.Thread})
	if err != nil {
		return out
	}
	pf, gates, err := filesOf(head)
	if err != nil {
		return out
	}
	out.Pipeline = pf
	for _, g := range gates {
		out.Gates[g.Gate] = g
	}
	return out
}

// compile turns the pipeline into a flow graph: one node per gate.
func (p *Pipeline) compile(cfg Config) (*flow.Compiled, error) {
	g := flow.NewGraph(pipelineSchema)
	var names []string
	for i, gs := range p.Gates {
		var prev *GateSpec
		if i > 0 {
			prev = &p.Gates[i-1]
		}
		name := gateNode(gs.Gate)
		g.AddNode(name, p.gateNode(cfg, gs, prev, i == len(p.Gates)-1))
		names = append(names, name)
	}
	return g.Chain(names...).Compile()
}

// gateNode runs one gate and returns the gate's file and the pipeline
// file's progress as the step's update. A failing gate fails the step (the
// runner records FAILED, and the files say so); a conflict with another
// writer aborts the run without committing anything (the runner commits
// nothing for a node error that is a store conflict).
func (p *Pipeline) gateNode(cfg Config, gs GateSpec, prev *GateSpec, last bool) flow.NodeFunc {
	return func(ctx context.Context, d state.Doc) (state.Update, error) {
		var pf File
		if err := d.Get("pipeline", &pf); err != nil {
			return nil, err
		}
		out, err := p.runGate(ctx, cfg, gs, p.gateInput(d, prev, cfg.Warn))
		if errors.Is(err, store.ErrConflict) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("gate %d: %w", gs.Gate, err)
		}
		out = p.redactor.JSON(out)
		gf := GateFile{Gate: gs.Gate, Agent: gs.Name, Metadata: gateMetadata(pf.Metadata), Output: out, Validation: p.validate(gs, out), Status: GatePartial}
		if gf.Validation.Passed {
			gf.Status = GateSuccess
		}
		pf.CurrentGate = gs.Gate
		pf.CompletedGates = append(slices.DeleteFunc(pf.CompletedGates, func(n int) bool { return n == gs.Gate }), gs.Gate)
		pf.Status = PipelineInProgress
		if last {
			pf.Status = finalStatus(d, gf)
		}
		return state.Update{"pipeline": pf, "gates": map[string]GateFile{strconv.Itoa(gs.Gate): gf}}, nil
	}
}

// finalStatus is the pipeline's status after its last gate: PARTIAL when
// any gate is, SUCCESS otherwise.
func finalStatus(d state.Doc, last GateFile) string {
	status := last.Status
	var gates map[string]GateFile
	if d.Has("gates") && d.Get("gates", &gates) == nil {
		for _, g := range gates {
			if g.Status == GatePartial {
				status = GatePartial
			}
		}
	}
	return status
}

func gateMetadata(m Metadata) GateMetadata {
	return GateMetadata{Domain: Sanitize(m.Domain), Feature: Sanitize(m.Feature), URL: m.URL}
}

// requestInput is what the first gate gets (the seed's "Pass requestId to
// Agents"): the metadata that names the files, the user story, the URL and
// the acceptance criteria.
func (p *Pipeline) requestInput() json.RawMessage {
	m := p.sanitizedMetadata()
	b, _ := json.Marshal(map[string]any{ // plain data always marshals
		"metadata":           map[string]string{"domain": m.Domain, "feature": m.Feature},
		"userStory":          m.UserStory,
		"url":                m.URL,
		"acceptanceCriteria": m.AcceptanceCriteria,
	})
	return b
}

// gateInput is the previous gate's committed output (seed step 0B):
// SUCCESS and PARTIAL outputs that meet their contract are used; anything
// else is warned about and the gate falls back to the pipeline's request.
func (p *Pipeline) gateInput(d state.Doc, prev *GateSpec, warn func(string)) json.RawMessage {
	req := p.requestInput()
	if prev == nil {
		return req
	}
	say := func(format string, args ...any) {
		if warn != nil {
			warn(p.redactor.String(fmt.Sprintf(format, args...)))
		}
	}
	var gates map[string]GateFile
	if d.Has("gates") {
		if err := d.Get("gates", &gates); err != nil {
			say("previous gate %d output unreadable (%v); using the pipeline input", prev.Gate, err)
			return req
		}
	}
	gf, ok := gates[strconv.Itoa(prev.Gate)]
	switch {
	case !ok:
		say("no output of previous gate %d; using the pipeline input", prev.Gate)
		return req
	case gf.Status != GateSuccess && gf.Status != GatePartial:
		say("previous gate %d status %s; using the pipeline input", prev.Gate, gf.Status)
		return req
	}
	if c := p.contracts[prev.Gate]; c != nil {
		if err := c.Validate(gf.Output); err != nil {
			say("previous gate %d output does not meet its contract (%v); using the pipeline input", prev.Gate, err)
			return req
		}
	}
	return gf.Output
}

// runGate runs a gate's agent file (in namespace gateN of the thread) or
// its registered Go step.
func (p *Pipeline) runGate(ctx context.Context, cfg Config, gs GateSpec, input json.RawMessage) (json.RawMessage, error) {
	if gs.Step != "" {
		fn := cfg.Steps[gs.Step]
		if fn == nil {
			return nil, fmt.Errorf("%w: gate %d: no registered step %q", agentfile.ErrInvalidFile, gs.Gate, gs.Step)
		}
		return fn(ctx, input)
	}
	af, err := agentfile.Load(p.rel(gs.Agent))
	if err != nil {
		return nil, err
	}
	ns := gateNode(gs.Gate)
	resume, err := gateRunContinues(ctx, cfg.Store, cfg.Thread, ns)
	if err != nil {
		return nil, err
	}
	run := agentfile.Run
	if resume {
		run = agentfile.Resume
	}
	acfg := p.agentConfig(cfg, gs.Gate, input)
	acfg.Namespace = ns
	res, err := run(ctx, af, acfg)
	if err != nil {
		return nil, err
	}
	if res.Result.StopReason != state.StopSuccess {
		return nil, fmt.Errorf("gate %d agent stopped: %s", gs.Gate, res.Result.StopReason)
	}
	return res.FinalOutput, nil
}

// gateRunContinues reports whether the gate's namespace holds a run of this
// very step to continue (a crash or failure mid-gate), rather than a run
// made for an older checkpoint of the thread (before a fork within the
// thread), which must not be reused: a run belongs to the step when its
// input checkpoint names this step's task (same thread, namespace, read
// seq and node) as its parent.
func gateRunContinues(ctx context.Context, s store.Store, thread, ns string) (bool, error) {
	info, ok := flow.Info(ctx)
	if !ok {
		return false, nil
	}
	for cp, err := range s.History(ctx, store.HistoryRequest{Thread: thread, Namespace: ns}) {
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if cp.Meta.Source != "input" {
			continue
		}
		if key, ok := flow.ParentTask(cp); ok {
			return key == info.Key, nil
		}
		// Written before nested runs named their parent task: a run
		// belongs to the step when it started after the checkpoint read.
		read, err := s.Load(ctx, store.LoadRequest{Thread: thread, Seq: info.ReadSeq})
		if err != nil {
			return false, err
		}
		return !cp.CreatedAt.Before(read.CreatedAt), nil
	}
	return false, nil
}
