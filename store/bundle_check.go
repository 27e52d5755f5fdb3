package store

import (
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/state"
)

// bundlePlan is a bundle read and checked whole.
type bundlePlan struct {
	man    bundleManifest
	thread bundleThread
	cps    []bundleCheckpoint
	runs   []bundleRun
	// root is the index in cps of the root namespace's last checkpoint
	// (-1: none).
	root int
}

// maxBundleSeq is the largest seq a bundle may hold (the SQLite store's
// bound, the smallest of the backends').
const maxBundleSeq = 1<<32 - 1

// parseBundle reads a bundle and checks everything in it: its sections'
// order and fields, and that each checkpoint's patch, applied to its
// parent's state, gives the state the bundle records for it.
func parseBundle(b []byte) (*bundlePlan, error) {
	secs, err := splitBundle(b)
	if err != nil {
		return nil, err
	}
	if len(secs) < 2 || secs[0].kind != secManifest || secs[1].kind != secThread {
		return nil, bundleError("the bundle does not begin with its manifest and thread")
	}
	p := &bundlePlan{root: -1}
	if err := p.readHead(secs[0], secs[1]); err != nil {
		return nil, err
	}
	c := checker{plan: p, nsIndex: -1}
	for _, s := range secs[2:] {
		switch s.kind {
		case secCheckpoint:
			err = c.checkpoint(s)
		case secRun:
			err = c.run(s)
		default:
			err = bundleError("unknown section %q at byte %d", s.kind, s.off)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := c.endNamespace(); err != nil {
		return nil, err
	}
	if c.nsIndex != len(p.man.Namespaces)-1 {
		return nil, bundleError("namespace %q of the manifest has no checkpoints", p.man.Namespaces[c.nsIndex+1])
	}
	return p, nil
}

// readHead reads and checks the manifest and the thread.
func (p *bundlePlan) readHead(man, th rawSection) error {
	if err := decodeSection(man, &p.man); err != nil {
		return err
	}
	if p.man.Format != BundleFormat {
		return bundleError("the manifest says format %d, the header %d", p.man.Format, BundleFormat)
	}
	if err := ValidateID(p.man.Thread); err != nil {
		return bundleError("manifest: %v", err)
	}
	for i, ns := range p.man.Namespaces {
		if err := ValidateNamespace(ns); err != nil {
			return bundleError("manifest: %v", err)
		}
		if i > 0 && ns <= p.man.Namespaces[i-1] {
			return bundleError("manifest: namespaces out of order at %q", ns)
		}
	}
	if err := decodeSection(th, &p.thread); err != nil {
		return err
	}
	if p.thread.CreatedAt <= 0 {
		return bundleError("thread: creation time %d", p.thread.CreatedAt)
	}
	if len(p.thread.Metadata) > 0 {
		var md map[string]any
		if err := json.Unmarshal(p.thread.Metadata, &md); err != nil || md == nil {
			return bundleError("thread: metadata is not a JSON object")
		}
	}
	return nil
}

// checker checks the checkpoint and run sections in order.
type checker struct {
	plan    *bundlePlan
	nsIndex int                 // the namespace being read, in the manifest
	states  map[int64]state.Doc // its checkpoints' states by seq
	last    int64               // its last seq
	// parents are its checkpoints that have a child; pinned those whose
	// state's digest the bundle gives.
	parents, pinned map[int64]bool
	runs            map[string]bool
	refs            map[bundleRef]bool
}

type bundleRef struct {
	ns  string
	seq int64
}

// checkpoint checks one checkpoint section.
func (c *checker) checkpoint(s rawSection) error {
	p := c.plan
	if len(p.runs) > 0 {
		return bundleError("checkpoint at byte %d after the runs", s.off)
	}
	var bc bundleCheckpoint
	if err := decodeSection(s, &bc); err != nil {
		return err
	}
	if err := c.enterNamespace(bc.Namespace, s.off); err != nil {
		return err
	}
	at := func(format string, args ...any) error {
		return bundleError("checkpoint %d of namespace %q (byte %d): "+format, append([]any{bc.Seq, bc.Namespace, s.off}, args...)...)
	}
	if bc.Seq <= c.last || bc.Seq > maxBundleSeq {
		return at("seq out of order (after %d) or out of range", c.last)
	}
	c.last = bc.Seq
	// A parent not in the bundle was pruned: the checkpoint has a
	// snapshot of its own.
	if _, ok := c.states[bc.Parent]; bc.Parent < 0 || bc.Parent >= bc.Seq || bc.Parent != 0 && !ok && bc.Snapshot == nil {
		return at("its parent %d is not before it", bc.Parent)
	}
	if rowDigest(&bc) != bc.Sum {
		return at("its checksum does not match its fields")
	}
	if err := checkFields(&bc); err != nil {
		return at("%v", err)
	}
	d, err := c.stateOf(&bc)
	if err != nil {
		return at("%v", err)
	}
	if bc.State != "" && stateDigest(d) != bc.State {
		return at("its patch does not give the state the bundle records for it")
	}
	c.states[bc.Seq] = d
	c.parents[bc.Parent] = true
	if bc.State != "" {
		c.pinned[bc.Seq] = true
	}
	if c.refs == nil {
		c.refs = map[bundleRef]bool{}
	}
	c.refs[bundleRef{bc.Namespace, bc.Seq}] = true
	if bc.Namespace == "" {
		p.root = len(p.cps)
	}
	p.cps = append(p.cps, bc)
	return nil
}

// enterNamespace moves to ns when a checkpoint of the next namespace of
// the manifest comes.
func (c *checker) enterNamespace(ns string, off int) error {
	names := c.plan.man.Namespaces
	if c.nsIndex >= 0 && names[c.nsIndex] == ns {
		return nil
	}
	if c.nsIndex+1 >= len(names) || names[c.nsIndex+1] != ns {
		return bundleError("checkpoint at byte %d: namespace %q is not the manifest's next", off, ns)
	}
	if err := c.endNamespace(); err != nil {
		return err
	}
	c.nsIndex++
	c.states, c.last, c.parents, c.pinned = map[int64]state.Doc{}, 0, map[int64]bool{}, map[int64]bool{}
	return nil
}

// endNamespace checks, at the end of a namespace, that every checkpoint
// that ends a branch has its state's digest: every patch is then pinned
// by the digest of a state it leads to, or by a snapshot.
func (c *checker) endNamespace() error {
	if c.nsIndex < 0 {
		return nil
	}
	for seq := range c.states {
		if !c.parents[seq] && !c.pinned[seq] {
			return bundleError("checkpoint %d of namespace %q ends a branch without its state's digest", seq, c.plan.man.Namespaces[c.nsIndex])
		}
	}
	return nil
}

// checkFields checks a checkpoint's fields other than its state.
func checkFields(bc *bundleCheckpoint) error {
	if !Status(bc.Status).Valid() {
		return fmt.Errorf("status %d", bc.Status)
	}
	if bc.CreatedAt <= 0 {
		return fmt.Errorf("creation time %d", bc.CreatedAt)
	}
	if len(bc.Meta) > 0 {
		var rec metaRecord
		if bc.Meta[0] != '{' || json.Unmarshal(bc.Meta, &rec) != nil {
			return fmt.Errorf("metadata is not a checkpoint's")
		}
	}
	if len(bc.ExternalID) > MaxExternalID {
		return fmt.Errorf("external id of %d bytes", len(bc.ExternalID))
	}
	for i, w := range bc.Writes {
		if w.Task == "" || i > 0 && w.Task <= bc.Writes[i-1].Task {
			return fmt.Errorf("pending write %d: task %q empty or out of order", i, w.Task)
		}
	}
	return nil
}

// stateOf is a checkpoint's state: its snapshot (which, on a checkpoint
// with a parent, must be the parent's state with the patch applied), or
// its parent's state with its patch applied.
func (c *checker) stateOf(bc *bundleCheckpoint) (state.Doc, error) {
	patch, err := state.DecodePatch(bc.Patch, true)
	if err != nil {
		return state.Doc{}, fmt.Errorf("patch: %v", err)
	}
	var applied state.Doc
	parent, hasParent := c.states[bc.Parent]
	if hasParent {
		if applied, err = parent.Apply(patch); err != nil {
			return state.Doc{}, fmt.Errorf("patch does not apply to its parent's state: %v", err)
		}
	}
	if bc.Snapshot == nil {
		if !hasParent {
			return state.Doc{}, fmt.Errorf("a checkpoint without a parent has no snapshot")
		}
		return applied, nil
	}
	snap, err := state.DecodeDoc(bc.Snapshot, true)
	if err != nil {
		return state.Doc{}, fmt.Errorf("snapshot: %v", err)
	}
	if hasParent && !snap.Equal(applied) {
		return state.Doc{}, fmt.Errorf("its snapshot is not its parent's state with its patch applied")
	}
	return snap, nil
}

// run checks one run section.
func (c *checker) run(s rawSection) error {
	var br bundleRun
	if err := decodeSection(s, &br); err != nil {
		return err
	}
	at := func(format string, args ...any) error {
		return bundleError("run %q (byte %d): "+format, append([]any{br.ID, s.off}, args...)...)
	}
	if err := ValidateID(br.ID); err != nil {
		return at("%v", err)
	}
	if c.runs == nil {
		c.runs = map[string]bool{}
	}
	if c.runs[br.ID] {
		return at("twice in the bundle")
	}
	c.runs[br.ID] = true
	if br.Status == "" || len(br.Status) > 64 || br.CreatedAt <= 0 || br.UpdatedAt < br.CreatedAt {
		return at("bad status or times")
	}
	for i, ev := range br.Events {
		if ev.Seq < 1 || i > 0 && ev.Seq <= br.Events[i-1].Seq || ev.Attempt < 0 {
			return at("event %d: seq %d out of order or attempt %d", i, ev.Seq, ev.Attempt)
		}
		if ev.RefSeq != 0 && !c.refs[bundleRef{ev.RefNS, ev.RefSeq}] || ev.RefSeq == 0 && ev.RefNS != "" {
			return at("event %d refers to checkpoint %d of namespace %q, not in the bundle", ev.Seq, ev.RefSeq, ev.RefNS)
		}
	}
	c.plan.runs = append(c.plan.runs, br)
	return nil
}
