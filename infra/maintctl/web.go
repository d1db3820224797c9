package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/spf13/cobra"

	"maintsignals/functions/web"
)

// webFlags configure the web view (`maintctl function web`, `maintctl up`).
type webFlags struct {
	listen                    string
	tokenFile                 string
	tlsCert, tlsKey, clientCA string
	listenSet                 bool         // --web-listen was given
	listener                  net.Listener // bound by up before the functions start
}

func addWebFlags(c *cobra.Command, f *webFlags) {
	c.Flags().StringVar(&f.listen, "web-listen", web.DefaultListen, `web: host:port of the read-only web view ("" for none); beyond loopback it needs --web-token-file or --web-client-ca`)
	c.Flags().StringVar(&f.tokenFile, "web-token-file", "", "web: file holding the bearer token every request must carry (at least 16 characters)")
	c.Flags().StringVar(&f.tlsCert, "web-tls-cert", "", "web: certificate (PEM) to serve HTTPS with")
	c.Flags().StringVar(&f.tlsKey, "web-tls-key", "", "web: key (PEM) of --web-tls-cert")
	c.Flags().StringVar(&f.clientCA, "web-client-ca", "", "web: authorities (PEM) whose client certificates are required (with --web-tls-cert)")
}

func (f webFlags) config(fe functionEnv) web.Config {
	return web.Config{Listen: f.listen, Listener: f.listener, TokenFile: f.tokenFile, TLSCert: f.tlsCert, TLSKey: f.tlsKey,
		ClientCA: f.clientCA, StuckAfter: fe.emit.stuckAfter, Logger: fe.a.log}
}

// check refuses a web view that would not start, before anything else does.
func (f webFlags) check() error {
	if f.listen == "" {
		return nil
	}
	if err := web.Check(web.Config{Listen: f.listen, TokenFile: f.tokenFile, TLSCert: f.tlsCert, TLSKey: f.tlsKey, ClientCA: f.clientCA}); err != nil {
		return fmt.Errorf("--web-listen %s: %w", f.listen, err)
	}
	return nil
}

// bind listens for up's web view: when the default address is taken, up runs without the view
// (it says so); an address given explicitly that cannot be bound is an error.
func (a *app) bindWeb(f *webFlags) error {
	if f.listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", f.listen)
	switch {
	case err == nil:
		f.listener = ln
		return nil
	case !f.listenSet && errors.Is(err, syscall.EADDRINUSE):
		a.log.Warn("the web view's default address is taken; running without the web view (choose one with --web-listen)", "addr", f.listen)
		a.printf("web: %s is taken, running without the web view (--web-listen ADDR to choose another)\n", f.listen)
		f.listen = ""
		return nil
	}
	return fmt.Errorf("--web-listen %s: %w", f.listen, err)
}

// runWeb serves the web view until ctx ends; in up without a view it waits idle.
func runWeb(ctx context.Context, fe functionEnv) error {
	f := fe.emit.web
	if f.listen == "" {
		if !fe.up {
			return errors.New("the web function needs --web-listen ADDR")
		}
		<-ctx.Done()
		return nil
	}
	return web.Run(ctx, fe.js, f.config(fe))
}
