package scripted

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/internal/readfile"
	"github.com/cairn-dev/cairn/model"
)

func init() { model.Register("scripted", provider{}) }

// provider opens scripted models through the model registry:
// "scripted:FILE" on the command line, model.script in agent files. The
// script is read with the config's ReadFile (confined by the caller).
type provider struct{}

var errNoScript = errors.New("is required for the scripted provider")

func (provider) Open(_ context.Context, c model.Config) (agent.Model, error) {
	if c.Script == "" {
		return nil, &model.FieldError{Field: "script", Err: errNoScript}
	}
	read := c.ReadFile
	if read == nil {
		read = readfile.Read
	}
	b, err := read(c.Script)
	if err != nil {
		return nil, &model.FieldError{Field: "script", Err: err}
	}
	m, err := Parse(c.Script, b)
	if err != nil {
		return nil, &model.FieldError{Field: "script", Err: err}
	}
	return m, nil
}

func (provider) KeyEnv() string { return "" }

func (provider) ParseSpec(rest string) (model.Config, error) {
	return model.Config{Script: rest}, nil
}

func (provider) FormatSpec(c model.Config) string { return c.Script }

// Provider names the provider in traces (gen_ai.provider.name).
func (m *Model) Provider() string { return "scripted" }
