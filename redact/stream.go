package redact

import (
	"fmt"
	"strings"
)

// DefaultHoldLimit is how many bytes a Stream withholds at most (see
// Redactor.StreamLimit): more than a 4096-bit RSA private key in PEM.
const DefaultHoldLimit = 8 << 10

// Stream redacts a text that arrives in pieces, such as a model's reply
// token by token, releasing each piece as soon as it cannot become part
// of a secret. Write takes the next piece and returns the text that is
// safe to show now; Flush ends the text and returns the rest.
//
// What is held back is only text that could still turn into a secret: a
// suffix that begins a literal secret, an open secret shape ("sk-…",
// "Bearer …", a "-----BEGIN … PRIVATE KEY-----" block without its end, a
// key= value not yet ended, a URL's password before its '@') — found by
// running String's own regular expressions, as package regexp would, on
// the text as it arrives. Ordinary prose is released at once.
//
// The released pieces and Flush's result, joined, are exactly what String
// returns for the whole text, unless the hold limit is reached: when more
// than the limit is withheld, the stream releases "[REDACTED]" in its
// place and releases nothing more until the text it held is settled (the
// open secret ended, or proved not to be one; with the byte that settles
// it); from there on the output is exact again. The joined output is then
// String's with that stretch (one per time the limit is reached) replaced
// by "[REDACTED]": never more of the text, never a secret.
//
// A Stream is not safe for concurrent use. After Flush it starts a new
// text. A Stream of a nil Redactor, or of one that hides nothing,
// releases every piece as it comes.
type Stream struct {
	r      *Redactor
	limit  int
	passes []*pass
	// swallow: the limit was reached and "[REDACTED]" released; what the
	// passes release is dropped until they hold nothing.
	swallow bool
}

// Stream returns a streaming redactor for one text, holding back at most
// DefaultHoldLimit bytes.
func (r *Redactor) Stream() *Stream { return r.StreamLimit(DefaultHoldLimit) }

// StreamLimit returns a streaming redactor holding back at most limit
// bytes (at least 1; a limit below the length of a secret hides the whole
// of that secret's neighbourhood as "[REDACTED]" once reached).
func (r *Redactor) StreamLimit(limit int) *Stream {
	s := &Stream{r: r, limit: max(limit, 1)}
	s.passes = r.newPasses()
	return s
}

// Write takes the next piece of the text and returns what can be shown
// now (possibly "").
func (s *Stream) Write(piece string) string {
	if len(s.passes) == 0 {
		return piece
	}
	if s.swallow {
		piece = s.settle(piece)
	}
	out := s.feed(piece, false)
	if !s.swallow && s.Held() > s.limit {
		out += Replacement
		s.swallow = true
	}
	return out
}

// settle feeds the passes a byte at a time, dropping what they release,
// until they hold nothing: the stretch the released "[REDACTED]" stands
// for is settled. It returns the rest of piece.
func (s *Stream) settle(piece string) string {
	for i := range len(piece) {
		s.feed(piece[i:i+1], false)
		if s.Held() == 0 {
			s.swallow = false
			return piece[i+1:]
		}
	}
	return ""
}

// Flush ends the text: it returns what was held back, redacted as String
// redacts the end of a text, and makes the stream ready for a new text.
func (s *Stream) Flush() string {
	if len(s.passes) == 0 {
		return ""
	}
	out := s.feed("", true)
	if s.swallow {
		out = ""
	}
	s.swallow = false
	s.passes = s.r.newPasses()
	return out
}

// Held is how many bytes the stream withholds now, counted in every pass
// (at most the limit, unless the limit was reached: then they stand
// behind the "[REDACTED]" already released).
func (s *Stream) Held() int {
	n := 0
	for _, p := range s.passes {
		n += p.held()
	}
	return n
}

// feed runs a piece through the passes, each taking what the one before
// released.
func (s *Stream) feed(piece string, final bool) string {
	for _, p := range s.passes {
		piece = p.write(piece, final)
	}
	return piece
}

// programs are the compiled passes of a redactor, made on first use.
type programs struct {
	shapes, kv, url *program
}

// newPasses returns fresh passes for a stream: String's three passes, for
// those r has.
func (r *Redactor) newPasses() []*pass {
	if r == nil {
		return nil
	}
	pr := r.streamPrograms()
	var out []*pass
	if pr.shapes != nil {
		out = append(out, newPass(pr.shapes, false, func(string) string { return Replacement }))
	}
	if pr.kv != nil {
		out = append(out, newPass(pr.kv, true, kvReplace))
	}
	if pr.url != nil {
		out = append(out, newPass(pr.url, true, func(string) string { return Replacement + "@" }))
	}
	return out
}

// streamPrograms compiles the expressions of String's passes once.
func (r *Redactor) streamPrograms() *programs {
	r.progOnce.Do(func() {
		pr := &programs{}
		if r.re != nil {
			pr.shapes = mustProgram(r.re.String())
		}
		if r.kv != nil {
			pr.kv = mustProgram(r.kv.String())
		}
		if r.userinfo {
			pr.url = mustProgram(urlPassword.String())
		}
		r.progs = pr
	})
	return r.progs
}

// mustProgram compiles an expression package regexp compiled already.
func mustProgram(expr string) *program {
	p, err := compileProgram(expr)
	if err != nil {
		panic(fmt.Sprintf("redact: %q compiled for regexp but not for a stream: %v", expr, err))
	}
	return p
}

// kvReplace is what a key=value match's value becomes: null and empty
// strings stay, quoted values keep their quotes.
func kvReplace(val string) string {
	switch {
	case val == "null" || val == `""` || val == `\"\"`:
		return val
	case strings.HasPrefix(val, `\"`):
		return `\"` + Replacement + `\"`
	case strings.HasPrefix(val, `"`):
		return `"` + Replacement + `"`
	}
	return Replacement
}
