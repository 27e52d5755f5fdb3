package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion is what `cairn version` reports.
type buildVersion struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// versionOf reads the version from the binary's build information: the
// module version when installed with go install MODULE@VERSION, "(devel)"
// when built from a checkout, with the commit when git stamped it.
func versionOf(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Module: "github.com/cairn-dev/cairn", Version: "(unknown)", Go: runtime.Version()}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the module version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionOf(debug.ReadBuildInfo())
			if a.json {
				return a.printJSON(v)
			}
			line := fmt.Sprintf("cairn %s (%s", v.Version, v.Module)
			if v.Commit != "" {
				line += ", commit " + v.Commit
				if v.Modified {
					line += " with local changes"
				}
				if v.Time != "" {
					line += ", " + v.Time
				}
			}
			fmt.Fprintf(a.stdout, "%s, %s)\n", line, v.Go)
			return nil
		},
	}
}
