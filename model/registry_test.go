package model_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/model"
	_ "github.com/cairn-dev/cairn/model/anthropic"
	_ "github.com/cairn-dev/cairn/model/openai"
	_ "github.com/cairn-dev/cairn/model/scripted"
)

func TestDefaults(t *testing.T) {
	got := model.Defaults().Names()
	want := []string{"anthropic", "openai-compatible", "scripted"}
	if len(got) != len(want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Names() = %v, want %v", got, want)
		}
	}
	if envs := model.Defaults().KeyEnvs(); len(envs) != 2 || envs[0] != "ANTHROPIC_API_KEY" || envs[1] != "OPENAI_API_KEY" {
		t.Fatalf("KeyEnvs() = %v", envs)
	}
}

func TestSpecs(t *testing.T) {
	r := model.Defaults()
	tests := []struct {
		spec    string
		want    model.Config
		wantErr error
	}{
		{"scripted:replies.yaml", model.Config{Provider: "scripted", Script: "replies.yaml"}, nil},
		{"openai-compatible:llama3@http://127.0.0.1:11434/v1", model.Config{Provider: "openai-compatible", Model: "llama3", BaseURL: "http://127.0.0.1:11434/v1"}, nil},
		{"openai-compatible:gpt-4o", model.Config{Provider: "openai-compatible", Model: "gpt-4o"}, nil},
		{"anthropic:claude", model.Config{Provider: "anthropic", Model: "claude"}, nil},
		{"magic:x", model.Config{}, model.ErrUnknownProvider},
		{"scripted", model.Config{}, model.ErrConfig},
		{"scripted:", model.Config{}, model.ErrConfig},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := r.ParseSpec(tc.spec)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ParseSpec = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.Provider != tc.want.Provider || got.Model != tc.want.Model || got.BaseURL != tc.want.BaseURL || got.Script != tc.want.Script {
				t.Fatalf("ParseSpec = %+v, want %+v", got, tc.want)
			}
			back, err := r.FormatSpec(got)
			if err != nil || back != tc.spec {
				t.Fatalf("FormatSpec = %q, %v; want %q", back, err, tc.spec)
			}
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "r.yaml")
	if err := os.WriteFile(script, []byte("replies:\n  - text: hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) string { return "" }
	r := model.Defaults()
	tests := []struct {
		name    string
		cfg     model.Config
		wantErr error
		field   string
	}{
		{"scripted", model.Config{Provider: "scripted", Script: script}, nil, ""},
		{"scripted without a script", model.Config{Provider: "scripted"}, nil, "script"},
		{"scripted, missing file", model.Config{Provider: "scripted", Script: filepath.Join(dir, "nope.yaml")}, os.ErrNotExist, "script"},
		{"a named key variable must be set", model.Config{Provider: "openai-compatible", Model: "m", APIKeyEnv: "CAIRN_NO_SUCH_KEY", Getenv: noEnv}, model.ErrMissingKey, "api_key_env"},
		{"unknown provider", model.Config{Provider: "magic"}, model.ErrUnknownProvider, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := r.Open(context.Background(), tc.cfg)
			var fe *model.FieldError
			switch {
			case tc.wantErr == nil && tc.field == "":
				if err != nil || m == nil {
					t.Fatalf("Open = %v, %v", m, err)
				}
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Open = %v, want %v", err, tc.wantErr)
			case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
				t.Fatalf("Open = %v, want a FieldError on %q", err, tc.field)
			}
		})
	}
}

type nopProvider struct{}

func (nopProvider) Open(context.Context, model.Config) (agent.Model, error) { return nil, nil }
func (nopProvider) KeyEnv() string                                          { return "" }
func (nopProvider) ParseSpec(string) (model.Config, error)                  { return model.Config{}, nil }
func (nopProvider) FormatSpec(model.Config) string                          { return "" }

// A program's own registry extends the defaults without changing them.
func TestOwnRegistry(t *testing.T) {
	own := model.Defaults()
	own.Register("house", nopProvider{})
	if _, err := model.Defaults().ParseSpec("house:x"); !errors.Is(err, model.ErrUnknownProvider) {
		t.Fatalf("the defaults changed: %v", err)
	}
	if _, err := own.ParseSpec("house:x"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second provider under one name did not panic")
		}
	}()
	own.Register("house", nopProvider{})
}
