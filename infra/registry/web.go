package registry

import (
	"slices"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"maintsignals/functions/web"
	"maintsignals/shared/domain"
)

// roleReader is the NATS role of the functions that only read.
const roleReader = "reader"

// webFunction is the read-only web view. It serves people, not a consumer: nothing waiting in
// JetStream says how many replicas it needs, so it is not scaled on work (Serves is empty).
func webFunction() Function {
	return Function{
		Name:  web.Name,
		About: "serves the read-only web view of the fleet, its entities and campaigns (--web-listen)",
		Role:  roleReader,
		// The server gives requests in flight 5 s once it stops.
		Drain: 5 * time.Second,
		// It follows the records, the policies and the campaigns' buckets, and reads the events
		// (an entity's history, a campaign's lifecycle) and the notices.
		Access: Access{Read: slices.Concat([]string{domain.EventsStream, domain.PoliciesBucketStream, "KV_" + domain.CampaignsBucket, "KV_" + domain.CampaignEntitiesBucket}, RecordsStreams, EventsStreams, NoticesStreams)},
		Flags:  webFlags,
	}
}

func webFlags(fs *pflag.FlagSet) Instance {
	var cfg web.Config
	fs.StringVar(&cfg.Listen, "web-listen", web.DefaultListen, `host:port of the web view ("" for none); beyond loopback it needs --web-token-file, --web-tokens or --web-client-ca`)
	fs.StringVar(&cfg.TokenFile, "web-token-file", "", "file holding the bearer token every request to the web view must carry (at least 16 characters)")
	fs.StringVar(&cfg.TokensFile, "web-tokens", "", `file of customer tokens for the web view, a JSON array [{"name","token","scopes":["/subscriptions/<id>"]}]: each holder sees the entities of its scopes only`)
	fs.StringVar(&cfg.PageKeyFile, "web-page-key-file", "", "file holding a secret (at least 16 characters) that seals the API's page tokens: replicas that share it continue each other's walks (default: a key made at start)")
	fs.StringVar(&cfg.TLSCert, "web-tls-cert", "", "certificate (PEM) the web view serves HTTPS with")
	fs.StringVar(&cfg.TLSKey, "web-tls-key", "", "key (PEM) of --web-tls-cert")
	fs.StringVar(&cfg.ClientCA, "web-client-ca", "", "authorities (PEM) whose client certificates the web view requires (with --web-tls-cert)")
	stuckAfterFlag(fs, &cfg.StuckAfter)
	// The address is bound in Check, so that one that cannot be bound stops everything before
	// anything runs; the default one taken leaves the view out (taken) where up runs it.
	var (
		ln    net.Listener
		taken bool
	)
	return Instance{
		Check: func(_ context.Context, log *slog.Logger) error {
			if cfg.Listen == "" || ln != nil {
				return nil
			}
			if err := web.Check(cfg); err != nil {
				if errors.Is(err, web.ErrInvalidTokens) {
					return fmt.Errorf("--web-tokens: %w", err)
				}
				return fmt.Errorf("--web-listen %s: %w", cfg.Listen, err)
			}
			var err error
			ln, err = net.Listen("tcp", cfg.Listen)
			if err != nil && !fs.Changed("web-listen") && errors.Is(err, syscall.EADDRINUSE) {
				log.Warn("the web view's default address is taken; running without the web view (choose another with --web-listen)", "addr", cfg.Listen)
				taken, err = true, nil
			}
			if err != nil {
				return fmt.Errorf("--web-listen %s: %w", cfg.Listen, err)
			}
			return nil
		},
		Run: func(ctx context.Context, env Env) error {
			switch {
			case ln == nil && env.Up:
				<-ctx.Done() // up without a view
				return nil
			case cfg.Listen == "":
				return errors.New("the web function needs --web-listen ADDR")
			case taken:
				return fmt.Errorf("--web-listen %s: the address is taken", cfg.Listen)
			}
			c := cfg
			c.Listener, c.Logger = ln, env.Log
			return web.Run(ctx, env.JS, c)
		},
		Idle: func() bool { return cfg.Listen == "" },
		Address: func() string {
			if ln == nil {
				return ""
			}
			if cfg.TLSCert != "" {
				return "https://" + ln.Addr().String()
			}
			return "http://" + ln.Addr().String()
		},
	}
}
