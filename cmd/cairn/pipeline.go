package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn/agentfile"
	"github.com/cairn-dev/cairn/flow"
	"github.com/cairn-dev/cairn/internal/jsontext"
	"github.com/cairn-dev/cairn/pipeline"
	"github.com/cairn-dev/cairn/store"
)

// pipelineCall is what cairn run or cairn resume asks of a pipeline file.
type pipelineCall struct {
	path, thread, model string
	// resume: cairn resume. A finished pipeline then has its files brought
	// up to date from the store (exit 0); cairn run refuses it (exit 1).
	resume bool
	// answer answers the pause before an approval gate (--answer): a
	// flow.Approval, or nil to go on.
	answer any
}

// runPipeline runs a gate pipeline: without a thread, a new run on a new
// thread; on an existing thread of the same file (--thread, cairn resume,
// a fork), it continues where the thread stopped, skipping completed gates.
// A finished pipeline is refused (exit 1) with how to start over, or, by
// cairn resume, has its files rewritten from the store. A pause before an
// approval gate exits 3 saying how to answer it. Every check passes before
// the thread is created.
func (a *app) runPipeline(cmd *cobra.Command, pc pipelineCall) error {
	ctx := cmd.Context()
	p, err := pipeline.Load(pc.path)
	if err != nil {
		return &usageError{err}
	}
	o := runOptions{Kind: agentfile.KindPipeline}
	if o.File, err = filepath.Abs(pc.path); err != nil {
		return &usageError{err}
	}
	tp, stop, err := a.tracing(ctx)
	if err != nil {
		return err
	}
	defer stop()
	defer a.tellRedactions()
	cfg := pipeline.Config{Getenv: a.getenv, Logger: a.logger, TracerProvider: tp, Answer: pc.answer}
	if pc.model != "" {
		if cfg.Model, err = parseModelEnv(pc.model, a.getenv); err != nil {
			return err
		}
		if o.Model, err = storableModel(pc.model); err != nil {
			return err
		}
	}
	if err := p.Check(cfg); err != nil {
		return &usageError{err}
	}
	thread, s, err := a.openForRun(p.Name, pc.thread)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := pipelineThread(ctx, s, thread, o); err != nil {
		return err
	}
	if done, err := a.pipelineHead(ctx, s, p, thread, pc); done || err != nil {
		return err
	}
	a.announcePipeline(p, thread)
	cfg.Store, cfg.Thread = s, thread
	pr := a.pipelineProgress(p)
	cfg.Observer, cfg.OnGate = pr.event, pr.gate
	if cfg.Stream, err = a.streams(); err != nil {
		return err
	}
	cfg.Warn = func(w string) { fmt.Fprintln(a.stderr, "  ! "+w) }
	res, err := pipeline.Run(ctx, p, cfg)
	var fin *pipeline.FinishedError
	switch {
	case errors.As(err, &fin):
		return finishedError(fin, pc.path)
	case pc.answer != nil && errors.Is(err, store.ErrInvalidArgument) && (res == nil || res.Result.Head == 0):
		return &usageError{fmt.Errorf("--answer: %w", err)} // refused before anything ran: nothing stored
	case err != nil:
		return fmt.Errorf("%w (thread %q: fix the cause and run cairn resume %s)", err, thread, thread)
	}
	return a.reportPipeline(p, thread, res)
}

// pipelineHead looks at the thread's head before a run: an answer needs a
// pause to answer; a finished pipeline is refused (cairn run) or has its
// files brought up to date (cairn resume). done says the command is over.
func (a *app) pipelineHead(ctx context.Context, s store.Store, p *pipeline.Pipeline, thread string, pc pipelineCall) (done bool, err error) {
	head, err := s.Load(ctx, store.LoadRequest{Thread: thread})
	if errors.Is(err, store.ErrNotFound) {
		err = nil // a new thread
	}
	if err != nil {
		return true, err
	}
	if _, waiting := pipeline.Waiting(head); pc.answer != nil && !waiting {
		return true, usagef("--answer: pipeline thread %q is not waiting for approval; resume it without --answer", thread)
	}
	st, finished := pipeline.Finished(head)
	switch {
	case !finished:
		return false, nil
	case !pc.resume:
		return true, finishedError(&pipeline.FinishedError{Thread: thread, Status: st}, pc.path)
	}
	paths, err := p.WriteFiles(ctx, s, thread)
	if err != nil {
		return true, err
	}
	if a.json {
		return true, a.printJSON(map[string]any{"thread": thread, "status": st, "finished": true, "dir": p.StateDirOf(thread), "files": paths})
	}
	fmt.Fprintf(a.stdout, "pipeline %s: thread %s is finished (%s), nothing to run; its %d files in %s are up to date with the store\n",
		p.Name, thread, st, len(paths), p.StateDirOf(thread))
	return true, nil
}

// reportPipeline prints how a pipeline run ended; a pause before an
// approval gate exits 3 with the command that answers it.
func (a *app) reportPipeline(p *pipeline.Pipeline, thread string, res *pipeline.Result) error {
	gate, waiting := res.WaitingAt()
	if a.json {
		out := map[string]any{"thread": thread, "pipeline": res.Pipeline, "gates": res.Gates, "dir": res.Dir,
			"pipeline_file": p.PipelineFilePath(thread), "stop_reason": res.Result.StopReason}
		if waiting {
			out["waiting_for_approval_at_gate"] = gate
		}
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else if waiting {
		fmt.Fprintf(a.stdout, "pipeline %s: waiting for approval at gate %d, gates %v completed; %s\n", p.Name, gate, res.Pipeline.CompletedGates, p.PipelineFilePath(thread))
	} else {
		fmt.Fprintf(a.stdout, "pipeline %s: %s, gates %v completed; %s\n", p.Name, res.Pipeline.Status, res.Pipeline.CompletedGates, p.PipelineFilePath(thread))
	}
	switch {
	case waiting:
		return &interruptedError{thread: thread, approval: true, approvalGate: gate}
	case res.Pipeline.Status == pipeline.GateFailed:
		// A gate rejected at its approval ends the pipeline FAILED without a
		// failed step: still a failure to whoever scripts the run (exit 1).
		return fmt.Errorf("pipeline %s ended FAILED (%s)", p.Name, res.Result.StopReason)
	}
	return nil
}

// approvalForms are the answers a pipeline's approval gate takes.
const approvalForms = `approve, reject, or a JSON approval {"action": "approve"|"edit"|"reject", "value": {…}, "reason": "…", "by": "…"}`

// approvalAnswer reads --answer at a pipeline's approval gate, checked
// before anything runs.
func approvalAnswer(s string) (flow.Approval, error) {
	a := flow.Approval{Action: strings.TrimSpace(s)}
	switch {
	case strings.HasPrefix(a.Action, "{"):
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return a, usagef("--answer: %v; a pipeline's approval gate takes %s", err, approvalForms)
		}
	case a.Action != flow.ApprovalApprove && a.Action != flow.ApprovalReject:
		return a, usagef("--answer %q: a pipeline's approval gate takes %s", s, approvalForms)
	}
	if err := a.Check(); err != nil {
		return a, &usageError{fmt.Errorf("--answer: %w", err)}
	}
	return a, nil
}

// finishedError says how to start over on a finished pipeline (exit 1).
func finishedError(fin *pipeline.FinishedError, path string) error {
	return fmt.Errorf("%w: start a new run with cairn run %s (a new thread), or redo gates from a checkpoint with cairn fork %s --at SEQ --into NEW_THREAD and cairn resume NEW_THREAD",
		fin, path, fin.Thread)
}

// pipelineThread creates a new pipeline thread, or checks that an existing
// one runs this pipeline file (also when another process created it a
// moment ago).
func pipelineThread(ctx context.Context, s store.Store, thread string, o runOptions) error {
	_, err := s.CreateThread(ctx, store.Thread{ID: thread, Metadata: o.metadata()})
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrConflict) {
		return argError(err)
	}
	return checkRunThread(ctx, s, thread, o)
}

// announcePipeline prints the thread first: a line on stderr, or a first
// JSON line with --json.
func (a *app) announcePipeline(p *pipeline.Pipeline, thread string) {
	if a.json {
		b, _ := jsontext.Marshal(map[string]string{"kind": "thread", "thread": thread, "pipeline": p.Name, "store": a.shownStore(), "dir": p.StateDirOf(thread)}) // strings always marshal
		fmt.Fprintln(a.stdout, string(b))
		return
	}
	fmt.Fprintf(a.stderr, "thread %s: running pipeline %s (%s); files in %s\n", thread, p.Name, a.shownStore(), p.StateDirOf(thread))
}

// pipelinePrinter shows a pipeline's progress: each gate agent's steps
// with their own duration, then the gate's committed status and score.
type pipelinePrinter struct {
	a      *app
	names  map[string]string // gate node → "gate N AgentName"
	mu     sync.Mutex
	root   string               // the run id of the pipeline's own runner
	starts map[string]time.Time // run id → start of its current step
	enc    *jsontext.Encoder
	live   string // the model call whose reply is being printed
}

func (a *app) pipelineProgress(p *pipeline.Pipeline) *pipelinePrinter {
	enc := jsontext.NewEncoder(a.stdout)
	names := map[string]string{}
	for _, g := range p.Gates {
		names["gate"+strconv.Itoa(g.Gate)] = fmt.Sprintf("gate %d %s", g.Gate, g.Name)
	}
	return &pipelinePrinter{a: a, names: names, starts: map[string]time.Time{}, enc: enc}
}

// gateMark is the sign of a gate status.
func gateMark(status string) string {
	switch status {
	case pipeline.GateSuccess:
		return "✓"
	case pipeline.GatePartial:
		return "~"
	}
	return "✗"
}

// event prints one run event. The pipeline's runner starts first, so the
// first run_start names it; its steps are shown by gate.
func (pp *pipelinePrinter) event(e flow.Event) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if e.Kind == flow.EventRunEnd {
		pp.a.redacted.Add(int64(e.Redacted))
	}
	if pp.a.json {
		_ = pp.enc.Encode(e)
		return
	}
	if e.Kind == flow.EventRunStart && pp.root == "" {
		pp.root = e.RunID
	}
	w := pp.a.stderr
	if e.Kind == flow.EventMessage {
		pp.live = pp.a.printTokens(e, pp.live)
		return
	}
	if pp.live != "" && (e.Kind == flow.EventStepEnd || e.Kind == flow.EventError) {
		fmt.Fprintln(w)
		pp.live = ""
	}
	switch {
	case e.Kind == flow.EventStepStart:
		pp.starts[e.RunID] = e.Time
	case e.RunID == pp.root:
		if e.Kind == flow.EventNodeStart && e.Attempt <= 1 {
			fmt.Fprintf(w, "  %s …\n", pp.names[e.Node])
		}
		if e.Kind == flow.EventInterrupt {
			fmt.Fprintf(w, "  ? %s is waiting for approval\n", pp.names[e.Node])
		}
	case e.Kind == flow.EventStepEnd:
		tok := ""
		if e.Tokens.Input+e.Tokens.Output > 0 {
			tok = fmt.Sprintf(", tokens %d in / %d out", e.Tokens.Input, e.Tokens.Output)
		}
		fmt.Fprintf(w, "    ✓ %-16s checkpoint %-4d %6.0f ms%s\n", strings.Join(e.Nodes, ","), e.Seq, ms(e.Time.Sub(pp.starts[e.RunID])), tok)
	case e.Kind == flow.EventError:
		fmt.Fprintf(w, "    ✗ step failed: %s\n", e.Err)
	}
}

// gate prints a gate's committed outcome.
func (pp *pipelinePrinter) gate(r pipeline.GateReport) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	g := r.File
	if pp.a.json {
		_ = pp.enc.Encode(map[string]any{"kind": "gate", "gate": g.Gate, "agent": g.Agent, "status": g.Status, "score": g.Validation.Score,
			"passed": g.Validation.Passed, "issues": g.Validation.Issues, "seq": r.Seq, "duration_ms": ms(r.Duration)})
		return
	}
	mark := gateMark(g.Status)
	fmt.Fprintf(pp.a.stderr, "  %s gate %d %-18s %-7s score %3g  checkpoint %-4d %6.0f ms\n", mark, g.Gate, g.Agent, g.Status, g.Validation.Score, r.Seq, ms(r.Duration))
	if g.Status != pipeline.GateSuccess {
		for _, is := range g.Validation.Issues {
			fmt.Fprintf(pp.a.stderr, "      - %s\n", is)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
