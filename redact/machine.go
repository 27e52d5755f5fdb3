package redact

import (
	"regexp/syntax"
	"unicode/utf8"
)

// A program is a regular expression compiled for a pass of a Stream: the
// instructions package regexp compiles the same expression to, run by a
// Pike machine (below) that can stop wherever its input runs out and go
// on when more arrives, with regexp's leftmost-first semantics.
type program struct {
	prog *syntax.Prog
	// first says of each ASCII character whether a match can begin with
	// it; firstInsts are the instructions that can take a match's first
	// rune (for the others). skip is false when the expression can match
	// without taking a rune: every position must then be tried.
	first      [utf8.RuneSelf]bool
	firstDone  bool // first is filled in
	firstInsts []*syntax.Inst
	skip       bool
}

// compileProgram compiles expr as package regexp does.
func compileProgram(expr string) (*program, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	p := &program{prog: prog, skip: true}
	p.collectFirst(uint32(prog.Start), make([]bool, len(prog.Inst)))
	for c := range p.first {
		p.first[c] = p.canBegin(rune(c))
	}
	p.firstDone = true
	return p, nil
}

// collectFirst gathers the instructions that can take the first rune of
// a match, following every branch and ignoring what empty-width
// assertions ask (a superset is enough to skip safely).
func (p *program) collectFirst(pc uint32, seen []bool) {
	for pc != 0 && !seen[pc] {
		seen[pc] = true
		in := &p.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			p.collectFirst(in.Out, seen)
			pc = in.Arg
		case syntax.InstEmptyWidth, syntax.InstNop, syntax.InstCapture:
			pc = in.Out
		case syntax.InstMatch:
			p.skip = false
			return
		case syntax.InstFail:
			return
		default:
			p.firstInsts = append(p.firstInsts, in)
			return
		}
	}
}

// canBegin reports whether a match can begin with r.
func (p *program) canBegin(r rune) bool {
	if r >= 0 && r < utf8.RuneSelf && p.firstDone {
		return p.first[r]
	}
	for _, in := range p.firstInsts {
		if takes(in, r) {
			return true
		}
	}
	return false
}

// takes reports whether a rune instruction accepts r, as package regexp's
// machine decides it.
func takes(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRune:
		return in.MatchRune(r)
	case syntax.InstRune1:
		return r == in.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return false
}

// A thread is a position in the program with its captures: the match's
// start and end (0, 1) and group 1 (2, 3), -1 while unset.
type thread struct {
	pc  uint32
	cap [4]int
}

// A queue is the set of threads at one position, in priority order: a
// sparse set over the program counters, which also marks the
// instructions passed on the way (as package regexp's machine does, so
// that the same thread wins).
type queue struct {
	sparse []uint32
	dense  []entry
}

type entry struct {
	pc   uint32
	live bool // a rune or match instruction: a thread waits here
	cap  [4]int
}

func (q *queue) reset(n int) {
	if len(q.sparse) < n {
		q.sparse = make([]uint32, n)
	}
	q.dense = q.dense[:0]
}

func (q *queue) has(pc uint32) bool {
	j := q.sparse[pc]
	return j < uint32(len(q.dense)) && q.dense[j].pc == pc
}

// add puts the thread at pc, at position pos, in q, following the
// instructions that take no rune; flag holds the empty-width assertions
// true at pos.
func (q *queue) add(p *syntax.Prog, pc uint32, pos int, cap [4]int, flag syntax.EmptyOp) {
	for pc != 0 && !q.has(pc) {
		q.sparse[pc] = uint32(len(q.dense))
		q.dense = append(q.dense, entry{pc: pc})
		in := &p.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			q.add(p, in.Out, pos, cap, flag)
			pc = in.Arg
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^flag != 0 {
				return
			}
			pc = in.Out
		case syntax.InstNop:
			pc = in.Out
		case syntax.InstCapture:
			if in.Arg < uint32(len(cap)) {
				cap[in.Arg] = pos
			}
			pc = in.Out
		case syntax.InstFail:
			return
		default: // a match or rune instruction
			e := &q.dense[len(q.dense)-1]
			e.live, e.cap = true, cap
			return
		}
	}
}
