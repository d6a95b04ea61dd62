package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// process is a child process the bench starts and measures: a nats-server
// or a poller.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	logs *os.File
}

func start(name, logDir string, env []string, bin string, args ...string) (*process, error) {
	logs, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{}), logs: logs}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to exit (SIGTERM) and kills it after 15s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.logs.Close()
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// usage is a process's resident memory and CPU time so far, from /proc.
type usage struct {
	RSS int64
	CPU time.Duration
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

func (p *process) usage() (usage, error) {
	pid := p.cmd.Process.Pid
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("%s: %w (resource figures need Linux /proc)", p.name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return u, fmt.Errorf("%s: VmRSS %q: %w", p.name, v, err)
			}
			u.RSS = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis. utime and stime are fields 14
	// and 15.
	rest := stat[bytes.LastIndexByte(stat, ')')+2:]
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return u, fmt.Errorf("%s: short /proc stat", p.name)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("%s: /proc stat: %w", p.name, err)
	}
	u.CPU = time.Duration(ut+st) * clockTick
	return u, nil
}

// server is a nats-server process (or a cluster of three).
type server struct {
	procs []*process
	url   string
}

// startServer starts one JetStream nats-server on a free loopback port, or
// a three-node cluster when cluster is true.
func startServer(ctx context.Context, bin, dir string, cluster bool, pprofPort int) (*server, error) {
	n := 1
	if cluster {
		n = 3
	}
	ports := make([]int, 2*n)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	s := &server{}
	var urls, routes []string
	for i := range n {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		name := "nats-server"
		args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "-js", "-sd", filepath.Join(dir, fmt.Sprintf("js-%d", i))}
		if pprofPort > 0 && !cluster {
			args = append(args, "--profile", strconv.Itoa(pprofPort))
		}
		if cluster {
			name = fmt.Sprintf("nats-%d", i)
			args = append(args, "-n", name, "--cluster_name", "bench",
				"--cluster", routes[i], "--routes", strings.Join(routes, ","))
		}
		p, err := start(name, dir, nil, bin, args...)
		if err != nil {
			s.stop()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	s.url = strings.Join(urls, ",")
	if err := s.waitReady(ctx, cluster); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until JetStream answers (in a cluster: a meta leader
// is elected).
func (s *server) waitReady(ctx context.Context, cluster bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		nc, err := nats.Connect(s.url)
		if err == nil {
			_, err = nc.Request("$JS.API.INFO", nil, 2*time.Second)
			nc.Close()
			if err == nil {
				return nil
			}
		}
		for _, p := range s.procs {
			if p.exited() {
				return fmt.Errorf("%s exited: %w (see its log in the work directory)", p.name, p.err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nats-server not ready: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *server) stop() {
	for _, p := range s.procs {
		p.stop()
	}
}

// usage sums the usage of the server's processes.
func (s *server) usage() (usage, error) {
	var total usage
	for _, p := range s.procs {
		u, err := p.usage()
		if err != nil {
			return total, err
		}
		total.RSS += u.RSS
		total.CPU += u.CPU
	}
	return total, nil
}

// nodeUsage is each server process's usage, in node order.
func (s *server) nodeUsage() ([]usage, error) {
	out := make([]usage, len(s.procs))
	for i, p := range s.procs {
		u, err := p.usage()
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// machineStat is the machine's CPU time, busy and total, from /proc/stat.
type machineStat struct{ busy, total float64 }

func machineCPU() (machineStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineStat{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return machineStat{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var st machineStat
	for i, v := range f[1:] {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return machineStat{}, fmt.Errorf("/proc/stat: %w", err)
		}
		st.total += x
		if i != 3 && i != 4 { // idle, iowait
			st.busy += x
		}
	}
	return st, nil
}

// busySince is the share of CPU busy between then and m.
func (m machineStat) busySince(then machineStat) float64 {
	if m.total <= then.total {
		return 0
	}
	return (m.busy - then.busy) / (m.total - then.total)
}
