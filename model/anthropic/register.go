package anthropic

import (
	"context"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model"
)

func init() { model.Register("anthropic", provider{}) }

// provider opens Anthropic models through the model registry:
// "anthropic:MODEL" on the command line.
type provider struct{}

func (provider) Open(_ context.Context, c model.Config) (agent.Model, error) {
	m, err := New(Config{BaseURL: c.BaseURL, APIKeyEnv: c.APIKeyEnv, Model: c.Model, Temperature: c.Temperature, MaxTokens: c.MaxTokens, Getenv: c.Getenv})
	if err != nil {
		return nil, err
	}
	return agent.WithRetry(m, agent.RetryPolicy{Logger: c.Logger}), nil
}

func (provider) KeyEnv() string { return defaultKeyEnv }

func (provider) ParseSpec(rest string) (model.Config, error) {
	return model.Config{Model: rest}, nil
}

func (provider) FormatSpec(c model.Config) string { return c.Model }

// defaultKeyEnv holds the key when a config names no variable.
const defaultKeyEnv = "ANTHROPIC_API_KEY"

// Provider names the provider in traces (gen_ai.provider.name).
func (m *Model) Provider() string { return "anthropic" }

// ModelName is the model requested (gen_ai.request.model in traces).
func (m *Model) ModelName() string { return m.cfg.Model }
