// Command gen writes the Grafana dashboards of Maintenance Signals as JSON:
//
//	go run ./infra/dashboards/gen            # into infra/dashboards, from the repository root
//	go run ./infra/dashboards/gen -out DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"maintsignals/infra/dashboards"
)

func main() {
	out := flag.String("out", "infra/dashboards", "directory to write the dashboards' JSON into")
	flag.Parse()
	if st, err := os.Stat(*out); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "gen: -out %s is not a directory (run from the repository root, or pass -out)\n", *out)
		os.Exit(2)
	}
	if err := dashboards.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for _, d := range dashboards.All() {
		fmt.Println("wrote", *out+"/"+d.File)
	}
}
