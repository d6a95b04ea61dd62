package dev_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/tools/dev"
)

// serveConfig serves on free ports.
func serveConfig(t *testing.T) dev.ServeConfig {
	return dev.ServeConfig{NATSAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", DataDir: t.TempDir()}
}

// Serve serves the services' Prometheus metrics, and its endpoints name
// the variables the clients read.
func TestServeServesMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var body string
	var env string
	var natsErr error
	err := dev.Serve(ctx, serveConfig(t), func(e dev.Endpoints, _ *dev.Stack) {
		defer cancel()
		env = e.Env()
		nc, err := nats.Connect(e.NATSURL)
		if natsErr = err; err == nil {
			nc.Close()
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.MetricsURL, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, errors.Join(err, resp.Body.Close()))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body = string(b)
		// Every provider face is served, in its provider's words.
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, e.HTTPURL+"/replicate/"+dev.RouteName+"/v1/predictions/nope", nil)
		require.NoError(t, err)
		resp, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, err = io.ReadAll(resp.Body)
		require.NoError(t, errors.Join(err, resp.Body.Close()))
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Contains(t, string(b), `"detail"`, "Replicate's error shape")
	})
	require.NoError(t, err)
	require.NoError(t, natsErr, "the NATS URL reaches the server")
	require.True(t, strings.Contains(body, "pollux_jobs_terminal_total"), "the services' metrics are served")
	require.Contains(t, env, "POLLUX_NATS_URL=nats://127.0.0.1:")
	require.Contains(t, env, "NATS_URL=nats://127.0.0.1:")
}

// An address already taken is reported as such at once, naming the flag
// that chooses another.
func TestServeRefusesATakenAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	taken := ln.Addr().String()
	for flag, set := range map[string]func(*dev.ServeConfig){
		"--nats-addr":    func(c *dev.ServeConfig) { c.NATSAddr = taken },
		"--metrics-addr": func(c *dev.ServeConfig) { c.MetricsAddr = taken },
	} {
		cfg := serveConfig(t)
		set(&cfg)
		err := dev.Serve(context.Background(), cfg, func(dev.Endpoints, *dev.Stack) { t.Errorf("%s: served on a taken address", flag) })
		require.ErrorIs(t, err, syscall.EADDRINUSE, flag)
		require.ErrorContains(t, err, taken, flag)
		require.True(t, strings.Contains(err.Error(), flag), "%s: %v", flag, err)
	}
}

// A served stack's front door has the jobs index, the routes' census and
// the console: / leads to it.
func TestServeServesTheConsoleAndTheAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := map[string]string{}
	status := map[string]int{}
	err := dev.Serve(ctx, serveConfig(t), func(e dev.Endpoints, _ *dev.Stack) {
		defer cancel()
		for _, u := range []string{e.HTTPURL + "/", dev.ConsoleURL(e.HTTPURL), e.HTTPURL + "/v1/jobs", e.HTTPURL + "/v1/routes", e.HTTPURL + "/console/session"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, errors.Join(err, resp.Body.Close()))
			got[strings.TrimPrefix(u, e.HTTPURL)], status[strings.TrimPrefix(u, e.HTTPURL)] = resp.Header.Get("Content-Type")+" "+string(b), resp.StatusCode
		}
	})
	require.NoError(t, err)
	for path, code := range status {
		require.Equal(t, http.StatusOK, code, "%s: %s", path, got[path])
	}
	require.Contains(t, got["/"], "text/html", "/ leads to the console")
	require.Contains(t, got["/console/"], "text/html")
	require.Contains(t, got["/v1/jobs"], `"jobs":[]`)
	require.Contains(t, got["/v1/routes"], `"name":"`+dev.RouteName+`"`)
	require.Contains(t, got["/console/session"], `"auth":false`)
}
