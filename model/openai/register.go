package openai

import (
	"context"
	"strings"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model"
)

func init() { model.Register("openai-compatible", provider{}) }

// provider opens OpenAI-compatible models through the model registry:
// "openai-compatible:MODEL[@BASE_URL]" on the command line.
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
	name, base, _ := strings.Cut(rest, "@")
	return model.Config{Model: name, BaseURL: base}, nil
}

func (provider) FormatSpec(c model.Config) string {
	if c.BaseURL == "" {
		return c.Model
	}
	return c.Model + "@" + c.BaseURL
}

// defaultKeyEnv holds the key when a config names no variable.
const defaultKeyEnv = "OPENAI_API_KEY"

// Provider names the provider in traces (gen_ai.provider.name).
func (m *Model) Provider() string { return "openai" }

// ModelName is the model requested (gen_ai.request.model in traces).
func (m *Model) ModelName() string { return m.cfg.Model }
