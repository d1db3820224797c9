package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo describes the running binary from its build information, so that the image and
// a pod's log name exactly what runs.
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
}

func buildVersion() versionInfo {
	v := versionInfo{Module: "maintsignals", Version: "(devel)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.GoVersion = bi.Main.Path, bi.GoVersion
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary (module, Go, VCS revision)",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			v := buildVersion()
			if a.json() {
				return a.writeJSON(v)
			}
			a.printf("%s\n", v.line())
			return nil
		},
	}
}

// line is the version for people, as `maintctl version` and `maintctl --version` print it.
func (v versionInfo) line() string {
	s := fmt.Sprintf("maintctl %s (%s, %s)", v.Version, v.Module, v.GoVersion)
	if v.Revision != "" {
		mod := ""
		if v.Modified {
			mod = ", modified"
		}
		s += fmt.Sprintf(" revision %s%s", v.Revision, mod)
	}
	return s
}
