package embedded

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config configures an embedded server. The zero value listens on a random
// loopback port and needs StoreDir.
type Config struct {
	// StoreDir holds JetStream's files (required; file storage).
	StoreDir string
	// Host to listen on (default 127.0.0.1).
	Host string
	// Port to listen on (default -1: a random free port).
	Port int
	// ServerName names the server (default "pollux-embedded").
	ServerName string
	// Cluster, when Cluster.Name is set, joins a cluster of embedded servers.
	Cluster server.ClusterOpts
	// Routes are the cluster peers' route URLs.
	Routes []string
	// SyncAlways fsyncs every write (default: the server's periodic sync).
	SyncAlways bool
	// StartTimeout bounds the wait for the server to accept connections
	// (default 10s).
	StartTimeout time.Duration
}

// Start runs a server and waits until it accepts connections.
func Start(cfg Config) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: StoreDir is required")
	}
	opts := &server.Options{
		ServerName: cmp.Or(cfg.ServerName, "pollux-embedded"),
		Host:       cmp.Or(cfg.Host, "127.0.0.1"),
		Port:       cmp.Or(cfg.Port, -1),
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		SyncAlways: cfg.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
		Cluster:    cfg.Cluster,
	}
	if len(cfg.Routes) > 0 {
		opts.Routes = server.RoutesFromStr(strings.Join(cfg.Routes, ","))
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(cmp.Or(cfg.StartTimeout, 10*time.Second)) {
		s.Shutdown()
		return nil, errors.New("embedded nats: server did not become ready")
	}
	return s, nil
}
