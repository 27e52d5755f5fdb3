package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/agent"
)

// Errors of opening models; test with errors.Is.
var (
	// ErrUnknownProvider: no provider is registered under the name.
	ErrUnknownProvider = errors.New("model: unknown provider")
	// ErrMissingKey: the environment variable holding the API key is
	// empty or unset.
	ErrMissingKey = errors.New("model: API key variable is empty")
	// ErrConfig: a config or a spec a provider cannot use.
	ErrConfig = errors.New("model: invalid model config")
)

// Config describes a model, as an agent file's front matter does.
type Config struct {
	Provider    string
	Model       string // the model's name at the provider
	BaseURL     string
	APIKeyEnv   string // the variable holding the key; "" for the provider's default
	Temperature *float64
	MaxTokens   int
	Script      string // scripted: the replies file
	// ReadFile reads the files a provider needs (the scripted model's
	// script); callers pass one confined to their safe directory. Nil:
	// os.ReadFile.
	ReadFile func(name string) ([]byte, error)
	// Getenv reads environment variables (API keys). Nil: os.Getenv.
	Getenv func(string) string
	// Logger receives the provider's retries (debug). Nil: no logging.
	Logger *slog.Logger
}

func (c Config) getenv(k string) string {
	if c.Getenv == nil {
		return os.Getenv(k)
	}
	return c.Getenv(k)
}

// FieldError is a config field a provider cannot use; Field is the
// front-matter name ("script", "base_url", "model_name").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// A Provider builds models of one kind.
type Provider interface {
	// Open builds the model a config describes.
	Open(ctx context.Context, c Config) (agent.Model, error)
	// KeyEnv is the variable holding the API key when a config names none
	// ("" for a provider without keys).
	KeyEnv() string
	// ParseSpec reads the REST of a command-line spec "NAME:REST"
	// (cairn run --model) into a config, and FormatSpec writes it back.
	ParseSpec(rest string) (Config, error)
	FormatSpec(c Config) string
}

// Registry maps provider names to providers. It is safe for concurrent
// use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Provider
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Provider{}} }

// Register adds a provider under name. It panics when name is taken or p
// is nil, as sql.Register does.
func (r *Registry) Register(name string, p Provider) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil {
		panic("model: Register provider is nil")
	}
	if _, dup := r.m[name]; dup {
		panic("model: Register called twice for provider " + name)
	}
	r.m[name] = p
}

// Names lists the registered providers, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}

// Clone returns a copy that can be extended without changing r.
func (r *Registry) Clone() *Registry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return &Registry{m: maps.Clone(r.m)}
}

func (r *Registry) provider(name string) (Provider, error) {
	r.mu.RLock()
	p := r.m[name]
	r.mu.RUnlock()
	if p == nil {
		return nil, fmt.Errorf("%w %q (registered: %s)", ErrUnknownProvider, name, strings.Join(r.Names(), ", "))
	}
	return p, nil
}

// Check checks a config without opening anything: a registered provider
// and, when the config or the provider names a key variable, a key in it.
func (r *Registry) Check(c Config) error {
	if _, err := r.provider(c.Provider); err != nil {
		return err
	}
	if c.APIKeyEnv != "" && c.getenv(c.APIKeyEnv) == "" {
		return &FieldError{Field: "api_key_env", Err: fmt.Errorf("%w: environment variable %s is empty or unset", ErrMissingKey, c.APIKeyEnv)}
	}
	return nil
}

// Open builds the model a config describes, after Check.
func (r *Registry) Open(ctx context.Context, c Config) (agent.Model, error) {
	if err := r.Check(c); err != nil {
		return nil, err
	}
	p, _ := r.provider(c.Provider)
	return p.Open(ctx, c)
}

// KeyEnv is the variable holding a config's API key: the one it names,
// else its provider's default ("" for none).
func (r *Registry) KeyEnv(c Config) string {
	if c.APIKeyEnv != "" {
		return c.APIKeyEnv
	}
	if p, err := r.provider(c.Provider); err == nil {
		return p.KeyEnv()
	}
	return ""
}

// KeyEnvs lists every registered provider's default key variable, for
// redaction: their values never reach a store.
func (r *Registry) KeyEnvs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for _, name := range slices.Sorted(maps.Keys(r.m)) {
		if k := r.m[name].KeyEnv(); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// ParseSpec reads a command-line spec "NAME:REST" (scripted:FILE,
// openai-compatible:MODEL[@BASE_URL], anthropic:MODEL).
func (r *Registry) ParseSpec(spec string) (Config, error) {
	name, rest, ok := strings.Cut(spec, ":")
	if !ok || name == "" || rest == "" {
		return Config{}, fmt.Errorf("%w: model spec %q: want PROVIDER:ARGS (providers: %s)", ErrConfig, spec, strings.Join(r.Names(), ", "))
	}
	p, err := r.provider(name)
	if err != nil {
		return Config{}, err
	}
	c, err := p.ParseSpec(rest)
	if err != nil {
		return Config{}, fmt.Errorf("model spec %q: %w", spec, err)
	}
	c.Provider = name
	return c, nil
}

// FormatSpec writes a config back as a command-line spec.
func (r *Registry) FormatSpec(c Config) (string, error) {
	p, err := r.provider(c.Provider)
	if err != nil {
		return "", err
	}
	return c.Provider + ":" + p.FormatSpec(c), nil
}

// registered holds the providers registered by importing their packages.
// It is filled by init functions and only read afterwards.
var registered = NewRegistry()

// Register adds a provider to the registered ones; provider packages call
// it from init. It panics when name is taken or p is nil.
func Register(name string, p Provider) { registered.Register(name, p) }

// Defaults returns a copy of the registered providers, to use as it is or
// to extend with a program's own.
func Defaults() *Registry { return registered.Clone() }
