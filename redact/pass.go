package redact

import (
	"regexp/syntax"
	"unicode/utf8"
)

// A pass is one replacing pass of String (secret shapes and literals,
// key=value forms, URL passwords) over text that arrives in pieces. It
// finds the matches regexp's ReplaceAll finds, in the same order, and
// releases text as soon as no match can still cover it.
//
// Positions are offsets in the pass's whole input; text holds the input
// from off on (a few bytes before done, for the context of assertions).
type pass struct {
	p *program
	// keep: the replacement begins with the match's group 1, which starts
	// the match (key=value and URL passwords keep the key and the user):
	// a match's text is withheld only from the end of its group 1.
	keep bool
	// repl is what replaces the text of a match (after its group 1, in a
	// pass that keeps it).
	repl func(string) string

	text    []byte
	off     int
	done    int // the input before done is released
	lastEnd int // the end of the last match (regexp's lastMatchEnd)
	final   bool
	over    bool // the search went past the end of the final input
	s       search
	q       queue
}

// search is the state of one leftmost-first search, stopped where the
// input ran out.
type search struct {
	start   int  // where the search began
	startW  int  // the width of the rune at start (-1: not read yet)
	pos     int  // the next rune to read
	before  rune // the rune before pos (-1 at the beginning of the text)
	pend    []thread
	matched bool
	match   [4]int
}

func newPass(p *program, keep bool, repl func(string) string) *pass {
	ps := &pass{p: p, keep: keep, repl: repl}
	ps.restart(0)
	return ps
}

// write adds input (the last when final) and returns what can be released.
func (ps *pass) write(in string, final bool) string {
	ps.text = append(ps.text, in...)
	ps.final = final
	var out []byte
	ps.run(&out)
	ps.release(&out)
	ps.trim()
	return string(out)
}

// held is how many bytes of input are withheld.
func (ps *pass) held() int { return ps.off + len(ps.text) - ps.done }

// run reads runes until the input runs out, finishing each search that
// completes and starting the next, as regexp's ReplaceAll does.
func (ps *pass) run(out *[]byte) {
	for !ps.over {
		s := &ps.s
		if s.matched && len(s.pend) == 0 {
			ps.finish(out)
			continue
		}
		r, w, ok := ps.runeAt(s.pos)
		if !ok {
			return
		}
		if s.pos == s.start {
			s.startW = w
		}
		if w > 0 && !s.matched && len(s.pend) == 0 && ps.p.skip && !ps.p.canBegin(r) {
			s.before, s.pos = r, s.pos+w // no match can begin here
			continue
		}
		ps.step(r, w)
		if w == 0 { // the end of the text
			if !s.matched {
				ps.over = true
				return
			}
			ps.finish(out)
		}
	}
}

// step moves the search over rune r (w bytes; 0 at the end of the text):
// the threads waiting at pos, then a new one starting there (until a
// match is found), each taking r in priority order.
func (ps *pass) step(r rune, w int) {
	s, prog := &ps.s, ps.p.prog
	flag := syntax.EmptyOpContext(s.before, r)
	ps.q.reset(len(prog.Inst))
	for _, t := range s.pend {
		ps.q.add(prog, t.pc, s.pos, t.cap, flag)
	}
	if !s.matched {
		ps.q.add(prog, uint32(prog.Start), s.pos, [4]int{s.pos, -1, -1, -1}, flag)
	}
	next := s.pend[:0] // the waiting threads are in the queue now
	for _, e := range ps.q.dense {
		if !e.live {
			continue
		}
		in := &prog.Inst[e.pc]
		if in.Op == syntax.InstMatch {
			e.cap[1] = s.pos
			s.match, s.matched = e.cap, true
			break // lower-priority threads are cut off
		}
		if w > 0 && takes(in, r) {
			next = append(next, thread{pc: in.Out, cap: e.cap})
		}
	}
	s.pend = next
	s.before, s.pos = r, s.pos+w
}

// runeAt decodes the rune at pos as regexp does (an invalid byte is
// utf8.RuneError, 1 byte); ok is false when the input ends before a
// whole rune while more may come. At the end of the final input it
// returns -1, 0.
func (ps *pass) runeAt(pos int) (r rune, w int, ok bool) {
	b := ps.text[pos-ps.off:]
	switch {
	case len(b) == 0:
		return -1, 0, ps.final
	case b[0] < utf8.RuneSelf:
		return rune(b[0]), 1, true
	case !ps.final && !utf8.FullRune(b):
		return 0, 0, false
	}
	r, w = utf8.DecodeRune(b)
	return r, w, true
}

// finish ends a search that found a match: the text before it, its
// replacement (not for an empty match right after another), then the
// next search, from where regexp's ReplaceAll looks next.
func (ps *pass) finish(out *[]byte) {
	s := &ps.s
	a0, a1 := s.match[0], s.match[1]
	ps.emit(out, a0)
	if a1 > ps.lastEnd || a0 == 0 {
		g := a0 // the replaced part begins here
		if ps.keep && s.match[3] >= a0 {
			g = s.match[3]
		}
		ps.emit(out, g) // group 1, kept (released already, at least in part)
		*out = append(*out, ps.repl(string(ps.text[g-ps.off:a1-ps.off]))...)
	}
	ps.lastEnd, ps.done = a1, max(ps.done, a1)
	next := s.start + s.startW
	switch {
	case next > a1:
	case s.start+1 > a1:
		next = s.start + 1
	default:
		next = a1
	}
	if ps.final && next > ps.off+len(ps.text) {
		ps.over = true
		return
	}
	ps.restart(next)
}

// restart begins a search at pos.
func (ps *pass) restart(pos int) {
	before := rune(-1)
	if pos > 0 {
		before, _ = utf8.DecodeLastRune(ps.text[:pos-ps.off])
	}
	ps.s = search{start: pos, startW: -1, pos: pos, before: before, pend: ps.s.pend[:0]}
}

// emit releases the input up to pos as it is.
func (ps *pass) emit(out *[]byte, pos int) {
	if pos > ps.done {
		*out = append(*out, ps.text[ps.done-ps.off:pos-ps.off]...)
		ps.done = pos
	}
}

// release releases the input no match can cover any more: all of it at
// the end, else up to the earliest point a waiting thread (or a match
// found but not yet final) may still replace.
func (ps *pass) release(out *[]byte) {
	if ps.over {
		ps.emit(out, ps.off+len(ps.text))
		return
	}
	s := &ps.s
	h := s.pos
	for _, t := range s.pend {
		h = min(h, ps.safe(t.cap, s.pos))
	}
	if s.matched {
		h = min(h, ps.safe(s.match, s.pos))
	}
	ps.emit(out, h)
}

// safe is how far the text of a thread with captures cap is known to be
// released unchanged if the thread matches: up to its start, or, in a
// pass that keeps group 1, up to the end of group 1 (pos while open).
func (ps *pass) safe(cap [4]int, pos int) int {
	switch {
	case !ps.keep:
		return cap[0]
	case cap[3] >= 0:
		return cap[3]
	}
	return pos
}

// trim drops the released input but for the bytes before done that
// assertions and the next search's context may read.
func (ps *pass) trim() {
	if k := ps.done - utf8.UTFMax - ps.off; k > 0 && k >= len(ps.text)/2 {
		ps.text = append(ps.text[:0], ps.text[k:]...)
		ps.off += k
	}
}
