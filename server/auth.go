package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/cairn-dev/cairn/store"
)

// An API key is "cairn_<id>_<secret>": the id finds the key in the store,
// which keeps only the SHA-256 of the secret.
const keyPrefix = "cairn_"

// NewKey makes an API key for a tenant and stores its hash; the key itself
// is returned once and never stored.
func NewKey(ctx context.Context, ks store.KeyStore, tenant, name string, now time.Time) (string, store.KeyRecord, error) {
	if err := store.ValidateID(tenant); err != nil {
		return "", store.KeyRecord{}, fmt.Errorf("tenant: %w", err)
	}
	var id [6]byte
	var secret [32]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	_, _ = rand.Read(secret[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(sec))
	rec := store.KeyRecord{ID: hex.EncodeToString(id[:]), Tenant: tenant, Name: name, Hash: sum[:], CreatedAt: now.UnixNano()}
	if err := ks.PutKey(ctx, rec); err != nil {
		return "", store.KeyRecord{}, err
	}
	return keyPrefix + rec.ID + "_" + sec, rec, nil
}

// errBadKey: a request's API key is missing, malformed, unknown or revoked.
var errBadKey = errors.New("server: missing or unknown API key")

// authenticate finds the key a request carries (x-api-key, or
// Authorization: Bearer) and returns it.
func (s *Server) authenticate(r *http.Request) (store.KeyRecord, error) {
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			key = strings.TrimSpace(b)
		}
	}
	rest, ok := strings.CutPrefix(key, keyPrefix)
	id, secret, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 || store.ValidateID(id) != nil {
		return store.KeyRecord{}, errBadKey
	}
	rec, err := s.cfg.Keys.Key(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.KeyRecord{}, errBadKey
	}
	if err != nil {
		return store.KeyRecord{}, err
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], rec.Hash) != 1 {
		return store.KeyRecord{}, errBadKey
	}
	return rec, nil
}

// limiters hold one token bucket per API key.
type limiters struct {
	mu     sync.Mutex
	perKey map[string]*rate.Limiter
	rate   rate.Limit
	burst  int
}

func newLimiters(perSecond float64) *limiters {
	if perSecond <= 0 {
		return nil
	}
	return &limiters{perKey: map[string]*rate.Limiter{}, rate: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond)))}
}

// allow takes a token of key's bucket, or says how long until one comes.
func (l *limiters) allow(key string) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	lim := l.perKey[key]
	if lim == nil {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.perKey[key] = lim
	}
	l.mu.Unlock()
	res := lim.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}

// admit authenticates a request (when the server has keys) and applies
// the rate limit; it returns the request's tenant and its key's name.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (string, string, bool) {
	if s.cfg.Keys == nil {
		return "", "", true
	}
	rec, err := s.authenticate(r)
	if err != nil {
		if !errors.Is(err, errBadKey) {
			s.writeError(w, r, err)
			return "", "", false
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": "missing or unknown API key: send x-api-key (cairn keys create makes one)"})
		return "", "", false
	}
	if ok, wait := s.limits.allow(rec.ID); !ok {
		w.Header().Set("Retry-After", fmt.Sprint(int(math.Ceil(wait.Seconds()))))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"detail": fmt.Sprintf("rate limit of %g requests a second for this key; retry in %s", float64(s.limits.rate), wait.Round(time.Millisecond))})
		return "", "", false
	}
	who := "key " + rec.ID
	if rec.Name != "" {
		who += " (" + rec.Name + ")"
	}
	return rec.Tenant, who, true
}
