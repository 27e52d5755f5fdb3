// Package embedtest is a fake OpenAI-compatible embeddings endpoint for
// tests: it speaks the real wire format (POST /v1/embeddings, a bearer
// key, input as a string or an array of strings, float or base64
// encoding) and answers deterministic vectors that count the words of
// Vocabulary in each text, so cosine similarity follows shared words.
package embedtest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// Vocabulary are the words a vector counts, one dimension each.
var Vocabulary = []string{"apple", "banana", "cherry", "dog", "cat", "car", "tea", "coffee"}

// Dims is the length of the vectors.
var Dims = len(Vocabulary)

// Vector is the vector of a text: how often each word of Vocabulary
// appears in it (any case).
func Vector(text string) []float32 {
	v := make([]float32, Dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		for i, voc := range Vocabulary {
			if w == voc {
				v[i]++
			}
		}
	}
	return v
}

// Request is what a client sent.
type Request struct {
	Model          string
	Input          []string
	EncodingFormat string
}

// Server is the fake endpoint; URL is its base URL (…/v1).
type Server struct {
	URL string
	// Key is the bearer key it wants ("" takes any).
	Key string

	mu       sync.Mutex
	requests []Request
	fail     int // answer the next fail requests with a 500
}

// New starts a server wanting key, closed when the test ends.
func New(t testing.TB, key string) *Server {
	s := &Server{Key: key}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL + "/v1"
	return s
}

// Requests returns what clients sent so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Texts returns every text clients asked for, in order.
func (s *Server) Texts() []string {
	var out []string
	for _, r := range s.Requests() {
		out = append(out, r.Input...)
	}
	return out
}

// FailNext makes the next n requests fail with a 500.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		apiError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if s.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.Key {
		apiError(w, http.StatusUnauthorized, "Incorrect API key provided")
		return
	}
	var body struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "bad JSON: "+err.Error())
		return
	}
	req := Request{Model: body.Model, EncodingFormat: body.EncodingFormat}
	var one string
	if json.Unmarshal(body.Input, &one) == nil {
		req.Input = []string{one}
	} else if err := json.Unmarshal(body.Input, &req.Input); err != nil || len(req.Input) == 0 {
		apiError(w, http.StatusBadRequest, "input must be a string or a non-empty array of strings")
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	failing := s.fail > 0
	if failing {
		s.fail--
	}
	s.mu.Unlock()
	if failing {
		apiError(w, http.StatusInternalServerError, "the embeddings backend is down")
		return
	}
	if body.Model == "" {
		apiError(w, http.StatusBadRequest, "you must provide a model parameter")
		return
	}
	s.answer(w, req)
}

func (s *Server) answer(w http.ResponseWriter, req Request) {
	data := make([]map[string]any, len(req.Input))
	tokens := 0
	for i, text := range req.Input {
		if text == "" {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("input[%d] is empty", i))
			return
		}
		tokens += len(strings.Fields(text))
		v := Vector(text)
		var emb any = v
		if req.EncodingFormat == "base64" {
			b := make([]byte, 0, 4*len(v))
			for _, f := range v {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": tokens, "total_tokens": tokens}})
}
