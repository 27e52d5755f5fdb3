package agentfile

// The built-in model providers: agent files and pipelines name them in
// model.provider, so a program that runs agent files has them registered.
// A program adds its own through RunConfig.Models.
import (
	_ "github.com/cairn-dev/cairn/model/anthropic"
	_ "github.com/cairn-dev/cairn/model/openai"
	_ "github.com/cairn-dev/cairn/model/scripted"
)
