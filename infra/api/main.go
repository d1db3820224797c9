// Command api writes the OpenAPI document of the read API (functions/web) to
// infra/api/openapi.json, or to the file named by -out.
package main

import (
	"flag"
	"fmt"
	"os"

	"maintsignals/functions/web"
)

func main() {
	out := flag.String("out", "infra/api/openapi.json", "where to write the document")
	flag.Parse()
	b, err := web.Document()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}
