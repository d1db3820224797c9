package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// Bound is a set of functions bound to the flags of one command line.
type Bound struct {
	Functions []Function
	Instances []Instance
	// shared: a flag of a later function that an earlier one already put on the command line
	// under the same name, and that one, whose value it takes.
	shared []struct{ dst, src *pflag.Flag }
}

// Bind puts the flags of fns on fs and binds each function to them. A name that several
// functions share is one flag (the same type and default, which a test keeps so) whose value
// reaches each of them once Sync runs; with several functions, each flag's usage says whose
// it is.
func Bind(fs *pflag.FlagSet, fns []Function) *Bound {
	b := &Bound{Functions: fns}
	owners := map[string][]string{}
	for _, f := range fns {
		own := pflag.NewFlagSet(f.Name, pflag.ContinueOnError)
		b.Instances = append(b.Instances, f.Flags(own))
		own.VisitAll(func(fl *pflag.Flag) {
			owners[fl.Name] = append(owners[fl.Name], f.Name)
			if first := fs.Lookup(fl.Name); first != nil {
				b.shared = append(b.shared, struct{ dst, src *pflag.Flag }{fl, first})
				return
			}
			fs.AddFlag(fl)
		})
	}
	if len(fns) > 1 {
		for name, who := range owners {
			fl := fs.Lookup(name)
			fl.Usage = strings.Join(who, ", ") + ": " + fl.Usage
		}
	}
	return b
}

// Sync gives every function the value of a shared flag that was set; call it after parsing.
func (b *Bound) Sync() error {
	for _, s := range b.shared {
		if !s.src.Changed {
			continue
		}
		var err error
		if sv, ok := s.src.Value.(pflag.SliceValue); ok {
			err = s.dst.Value.(pflag.SliceValue).Replace(sv.GetSlice())
		} else {
			err = s.dst.Value.Set(s.src.Value.String())
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", s.src.Name, err)
		}
		s.dst.Changed = true
	}
	return nil
}

// Serves reports whether a bound function that is not idle reads stream.
func (b *Bound) Serves(stream string) bool {
	for i, f := range b.Functions {
		in := b.Instances[i]
		if (in.Idle == nil || !in.Idle()) && slices.Contains(f.Streams(), stream) {
			return true
		}
	}
	return false
}

// ErrStopped is wrapped when a function returns while it should still run.
var ErrStopped = errors.New("stopped unexpectedly")

// Run checks every function's flags, then runs them all until ctx is cancelled or one fails
// (which stops the others), and returns once they have drained; ready is called once they are
// all started. The error names the first function that failed.
func (b *Bound) Run(ctx context.Context, env Env, ready func(names []string)) error {
	if err := b.Sync(); err != nil {
		return err
	}
	if len(b.Functions) == 0 {
		return errors.New("no function to run")
	}
	log := env.logger()
	for _, in := range b.Instances {
		if in.Check != nil {
			if err := in.Check(ctx, log); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		names []string
	)
	for i, f := range b.Functions {
		names = append(names, f.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.Instances[i].Run(ctx, env.forRole(f.Role))
			switch {
			case err == nil && ctx.Err() == nil:
				err = ErrStopped
			case ctx.Err() != nil && errors.Is(err, context.Canceled):
				// Stopped while it was still starting (opening the bucket, finding its
				// consumers): a stop, not a failure.
				err = nil
			}
			if err != nil {
				once.Do(func() { first = fmt.Errorf("function %s: %w", f.Name, err) })
				log.Error("function failed; stopping", "function", f.Name, "error", err)
				cancel()
			}
		}()
	}
	if ready != nil {
		ready(names)
	}
	<-ctx.Done()
	log.Info("stopping: draining functions")
	wg.Wait()
	return first
}

// forRole is env for a function of role.
func (e Env) forRole(role string) Env {
	if js, ok := e.ByRole[role]; ok {
		e.JS = js
	}
	return e
}

// logger is env's logger, or the default one.
func (e Env) logger() *slog.Logger {
	if e.Log == nil {
		return slog.Default()
	}
	return e.Log
}
