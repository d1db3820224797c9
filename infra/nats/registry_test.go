package natsconf_test

import (
	"strings"
	"testing"

	natsconf "maintsignals/infra/nats"
	"maintsignals/infra/provision"
	"maintsignals/infra/registry"
)

// concrete turns a subject filter into a subject it matches.
func concrete(filter string) string {
	return strings.NewReplacer("*", "x", ">", "x").Replace(filter)
}

// TestRoles_AllowWhatEachFunctionDoes: the role of every function in the registry may do
// what its entry says (publish its subjects, read and get its streams, serve its consumers,
// those provisioning makes and those it makes itself), and the deny list takes none of it away.
func TestRoles_AllowWhatEachFunctionDoes(t *testing.T) {
	consumers := provision.Consumers(provision.DefaultConfig())
	for _, f := range registry.Functions() {
		t.Run(f.Name, func(t *testing.T) {
			r := natsconf.Role(f.Role)
			if !r.Valid() {
				t.Fatalf("role %q is not one of %v: add it to infra/nats", f.Role, natsconf.Roles())
			}
			var need []string
			for _, s := range f.Access.Publish {
				need = append(need, concrete(s))
			}
			for _, s := range f.Access.Read {
				need = append(need, "$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s, "$JS.API.CONSUMER.CREATE."+s+".x", "$JS.API.CONSUMER.MSG.NEXT."+s+".x")
			}
			for _, s := range f.Access.Get {
				need = append(need, "$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.MSG.GET."+s)
			}
			need = append(need, f.Access.API...)
			serve := func(sv registry.Serve, name string) {
				need = append(need, "$JS.API.STREAM.INFO."+sv.Stream, "$JS.API.CONSUMER.INFO."+sv.Stream+"."+name,
					"$JS.API.CONSUMER.MSG.NEXT."+sv.Stream+"."+name, "$JS.ACK."+sv.Stream+"."+name+".1.1.1.1.1")
				if sv.Pinned {
					need = append(need, "$JS.API.CONSUMER.UNPIN."+sv.Stream+"."+name)
				}
				if sv.Creates {
					need = append(need, "$JS.API.CONSUMER.CREATE."+sv.Stream+"."+name+"."+sv.Stream)
				}
			}
			for _, sv := range f.Serves {
				if sv.Creates {
					serve(sv, sv.Prefix+"x")
				}
				for _, c := range consumers {
					if sv.Matches(c.Stream, c.Durable) {
						serve(sv, c.Durable)
					}
				}
			}
			for _, s := range need {
				if !r.MayPublish(s) {
					t.Errorf("role %s may not publish %s, which function %s needs", r, s, f.Name)
				}
			}
		})
	}
}
