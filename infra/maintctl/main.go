// Command maintctl runs and operates maintenance signals: the whole stack on one machine
// (`maintctl up`), one function for deployment (`maintctl function`), provisioning, and the
// admin verbs that set and read the maintenance state of an entity. See `maintctl --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one ends the process at once (default handling).
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(exitCode(err))
	}
}
