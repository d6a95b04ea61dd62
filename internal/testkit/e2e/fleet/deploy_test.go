package fleet_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
	"github.com/pollux-dev/pollux/pkg/events"
)

// streamsMaxBytes is what the server reserves for Pollux's streams with the
// default options: JetStream's max_file_store must exceed it.
func streamsMaxBytes() int64 {
	var sum int64
	for _, s := range events.Default.Streams(events.Options{}) {
		sum += max(s.MaxBytes, 0)
	}
	return sum
}

// TestNATSConfigs checks deploy/nats: nats-server v2.15.2 (built from the
// module) accepts every file with -t, and the files say what their comments
// promise: JetStream on a file store sized above the streams' reservations,
// a cluster of three uniquely named nodes each routing to the other two,
// the strict variant equal to the default but for sync_interval: always,
// and the Pollux account with its users.
func TestNATSConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nats-server")
	}
	bin := e2etest.Binaries(t)
	dir := filepath.Join(e2etest.DeployDir(t), "nats")
	files := []string{"single.conf"}
	for _, d := range []string{"cluster", "cluster-strict"} {
		for i := 1; i <= 3; i++ {
			files = append(files, fmt.Sprintf("%s/nats-%d.conf", d, i))
		}
	}
	for _, f := range files {
		cmd := exec.Command(filepath.Join(bin, "nats-server"), "-t", "-c", filepath.Join(dir, f))
		cmd.Env = append(os.Environ(), e2etest.NATSPasswordEnv()...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "nats-server -t %s: %s", f, out)
		require.Contains(t, string(out), "is valid", f)
	}

	// The server reads the passwords from its environment when it parses.
	for _, kv := range e2etest.NATSPasswordEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	load := func(f string) *server.Options {
		t.Helper()
		o, err := server.ProcessConfigFile(filepath.Join(dir, f))
		require.NoError(t, err, f)
		require.True(t, o.JetStream, "%s: JetStream enabled", f)
		require.NotEmpty(t, o.StoreDir, "%s: a file store", f)
		require.Greater(t, o.JetStreamMaxStore, streamsMaxBytes(), "%s: max_file_store above the streams' max bytes", f)
		require.Equal(t, "SYS", o.SystemAccount, f)
		require.Empty(t, o.NoAuthUser, "%s: no anonymous access", f)
		users := map[string]*server.User{}
		for _, u := range o.Users {
			users[u.Username] = u
		}
		for _, name := range []string{"ingest", "poller", "webhook", "client", "admin"} {
			u := users[name]
			require.NotNil(t, u, "%s: user %s", f, name)
			require.Equal(t, "POLLUX", u.Account.Name, "%s: %s in the Pollux account", f, name)
			require.Equal(t, e2etest.NATSPasswords[name], u.Password, "%s: %s's password from the environment", f, name)
			require.Equal(t, name != "admin", u.Permissions != nil, "%s: %s's permissions", f, name)
		}
		return o
	}
	load("single.conf")

	names := map[string]bool{}
	for i := 1; i <= 3; i++ {
		o := load(fmt.Sprintf("cluster/nats-%d.conf", i))
		require.False(t, names[o.ServerName], "server_name %s is unique", o.ServerName)
		names[o.ServerName] = true
		require.Equal(t, fmt.Sprintf("nats-%d", i), o.ServerName)
		require.Equal(t, "pollux", o.Cluster.Name)
		require.False(t, o.SyncAlways, "periodic fsync by default")
		var routes []string
		for _, r := range o.Routes {
			routes = append(routes, r.Host)
			require.Equal(t, strconv.Itoa(o.Cluster.Port), r.Port(), "route %s to the cluster port", r)
		}
		var peers []string
		for j := 1; j <= 3; j++ {
			if j != i {
				peers = append(peers, fmt.Sprintf("nats-%d:%d", j, o.Cluster.Port))
			}
		}
		require.ElementsMatch(t, peers, routes, "nats-%d routes to the other two", i)

		strict := load(fmt.Sprintf("cluster-strict/nats-%d.conf", i))
		require.True(t, strict.SyncAlways, "cluster-strict/nats-%d.conf: sync_interval: always", i)
		require.Equal(t, o.StoreDir, strict.StoreDir)
		require.Equal(t, o.JetStreamMaxStore, strict.JetStreamMaxStore)
		require.Equal(t, o.ServerName, strict.ServerName)
		require.Equal(t, o.Cluster, strict.Cluster)
		require.Equal(t, o.Routes, strict.Routes)
		require.Equal(t, o.Port, strict.Port)
		require.Equal(t, o.HTTPPort, strict.HTTPPort)
	}
}

// TestNATSCluster runs the three nodes of deploy/nats/cluster (see
// e2etest.ShippedCluster) and sets up Pollux's streams and buckets with
// three replicas.
func TestNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nats-server")
	}
	t.Parallel()
	bin := e2etest.Binaries(t)
	dir := t.TempDir()
	js := e2etest.StartShippedCluster(t, bin, dir).Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := events.Default.Setup(ctx, js, events.Options{Replicas: 3})
	require.NoError(t, err)
	for _, s := range []jetstream.Stream{res.Intake, res.Checks, res.Webhooks, res.Slots, res.Events} {
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, jetstream.FileStorage, info.Config.Storage)
		require.Equal(t, 3, info.Config.Replicas, info.Config.Name)
		require.NotNil(t, info.Cluster, info.Config.Name)
		require.Len(t, info.Cluster.Replicas, 2, "%s: a leader and two replicas", info.Config.Name)
	}
	st, err := res.Jobs.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas)
	_, err = res.Jobs.Create(ctx, "probe", []byte(`{}`))
	require.NoError(t, err)
}

// TestComposeFile loads deploy/compose/compose.yaml the way `docker compose`
// does (compose-go, the Compose specification's schema, the .env file next
// to it) and checks that every file it refers to exists, that each Pollux
// service connects as its own NATS user, health-checks /healthz on the port
// it serves, and is scraped by deploy/prometheus/prometheus.yaml. With
// Debian's docker-compose installed it also runs `docker-compose config -q`.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(e2etest.DeployDir(t), "compose")
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithEnvFiles(), cli.WithDotEnv, cli.WithConsistency(true), cli.WithResolvedPaths(true))
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err)
	require.Equal(t, "pollux", p.Name)

	dotenv := readEnvFile(t, filepath.Join(dir, ".env"))
	for _, user := range []string{"sys", "ingest", "poller", "webhook", "client", "admin"} {
		require.NotEmpty(t, dotenv["NATS_"+strings.ToUpper(user)+"_PASSWORD"], ".env sets %s's password", user)
	}

	mounts := map[string]map[string]string{} // service → container path → host path
	for name, s := range p.Services {
		mounts[name] = map[string]string{}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				_, err := os.Stat(v.Source)
				require.NoError(t, err, "%s mounts %s", name, v.Source)
				mounts[name][v.Target] = v.Source
			} else {
				require.Contains(t, p.Volumes, v.Source, "%s: named volume %s is declared", name, v.Source)
			}
		}
		for _, f := range s.EnvFiles {
			_, err := os.Stat(f.Path)
			require.NoError(t, err, "%s's env_file", name)
		}
		if s.Build != nil {
			_, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile))
			require.NoError(t, err, "%s's Dockerfile", name)
		}
	}
	// hostPath finds the host file behind a path inside a container.
	hostPath := func(service, path string) string {
		for target, source := range mounts[service] {
			if rel, ok := strings.CutPrefix(path, target+"/"); ok {
				return filepath.Join(source, rel)
			}
			if path == target {
				return source
			}
		}
		t.Fatalf("%s: %s is not mounted", service, path)
		return ""
	}

	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("nats-%d", i)
		s := p.Services[name]
		require.Equal(t, name, s.Hostname, "the routes of deploy/nats/cluster name the nodes by host name")
		conf := s.Command[slices.Index(s.Command, "--config")+1]
		_, err := os.Stat(hostPath(name, conf))
		require.NoError(t, err, "%s runs %s", name, conf)
		require.Equal(t, fmt.Sprintf("%s/nats/cluster/nats-%d.conf", e2etest.DeployDir(t), i), hostPath(name, conf))
		require.True(t, slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Type == types.VolumeTypeVolume && v.Source == name && v.Target == "/data"
		}), "%s keeps its store in its own named volume", name)
		for _, user := range []string{"sys", "ingest", "poller", "webhook", "client", "admin"} {
			key := "NATS_" + strings.ToUpper(user) + "_PASSWORD"
			require.Equal(t, dotenv[key], *s.Environment[key], "%s gets %s", name, key)
		}
		require.Contains(t, strings.Join(s.HealthCheck.Test, " "), "/healthz")
	}

	metricsPorts := map[string]int{}
	for _, name := range []string{"ingest", "poller", "webhook"} {
		s := p.Services[name]
		require.Equal(t, []string{name}, []string(s.Command))
		cfg, err := config.Load(hostPath(name, *s.Environment["POLLUX_CONFIG"]))
		require.NoError(t, err, "%s's Pollux config", name)
		require.Equal(t, 3, cfg.Streams.Replicas, "R3 on the 3-node cluster")
		env := readEnvFile(t, s.EnvFiles[0].Path)
		for route, r := range cfg.Routes {
			require.NotEmpty(t, env[r.TokenEnv], "%s: route %s's token %s is in its env_file", name, route, r.TokenEnv)
		}

		var hosts []string
		for _, raw := range strings.Split(*s.Environment["POLLUX_NATS_URL"], ",") {
			u, err := url.Parse(raw)
			require.NoError(t, err)
			pw, _ := u.User.Password()
			require.Equal(t, name, u.User.Username(), "%s connects as its own user", name)
			require.Equal(t, dotenv["NATS_"+strings.ToUpper(name)+"_PASSWORD"], pw)
			hosts = append(hosts, u.Host)
		}
		require.ElementsMatch(t, []string{"nats-1:4222", "nats-2:4222", "nats-3:4222"}, hosts)

		port := addrPort(t, *s.Environment["POLLUX_METRICS_ADDR"])
		require.Equal(t, defaultMetricsPort(t, name), port, "%s serves metrics on its usual port", name)
		metricsPorts[name] = port
		test := strings.Join(s.HealthCheck.Test, " ")
		require.Contains(t, test, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), "%s's health check", name)
		require.GreaterOrEqual(t, time.Duration(*s.StopGracePeriod), 30*time.Second, "%s: time to drain", name)
		for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
			require.Equal(t, types.ServiceConditionHealthy, s.DependsOn[n].Condition)
		}
	}
	require.Equal(t, 2, *p.Services["poller"].Deploy.Replicas)
	require.Equal(t, strconv.Itoa(addrPort(t, *p.Services["webhook"].Environment["POLLUX_WEBHOOK_ADDR"])),
		fmt.Sprint(p.Services["webhook"].Ports[0].Target), "the webhook port is published")

	// Prometheus runs deploy/prometheus and scrapes every replica.
	prom := p.Services["prometheus"]
	var promConf string
	for _, arg := range prom.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			promConf = hostPath("prometheus", v)
		}
	}
	require.Equal(t, filepath.Join(e2etest.DeployDir(t), "prometheus", "prometheus.yaml"), promConf)
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			DNSSD []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(promConf)
	require.NoError(t, err)
	require.NoError(t, yamlv3.Unmarshal(b, &pc))
	scraped := map[string]int{}
	for _, sc := range pc.ScrapeConfigs {
		for _, d := range sc.DNSSD {
			for _, n := range d.Names {
				scraped[n] = d.Port
			}
		}
	}
	require.Equal(t, metricsPorts, scraped, "Prometheus scrapes each service on its metrics port")
	for _, f := range pc.RuleFiles {
		_, err := os.Stat(filepath.Join(filepath.Dir(promConf), f))
		require.NoError(t, err)
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(promtool, "check", "config", promConf).CombinedOutput()
		require.NoError(t, err, "promtool check config: %s", out)
	}

	dc, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Log("docker-compose not installed: `docker-compose config -q` not run")
		return
	}
	cmd := exec.Command(dc, "config", "-q")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COMPOSE_FILE=compose.yaml")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "docker-compose config -q: %s", out)
}

// readEnvFile reads KEY=value lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		env[k] = v
	}
	return env
}

// addrPort is the port of a listen address such as ":9101".
func addrPort(t *testing.T, addr string) int {
	t.Helper()
	_, port, ok := strings.Cut(addr, ":")
	require.True(t, ok, addr)
	n, err := strconv.Atoi(port)
	require.NoError(t, err, addr)
	return n
}

// defaultMetricsPort is the metrics port a binary serves unless told
// otherwise, read from its main.go.
func defaultMetricsPort(t *testing.T, binary string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e2etest.Root(t), "cmd", binary, "main.go"))
	require.NoError(t, err)
	m := regexp.MustCompile(`"metrics_addr":\s*":(\d+)"`).FindSubmatch(b)
	require.NotNil(t, m, "cmd/%s/main.go sets metrics_addr", binary)
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// k8sObjects strictly decodes every manifest of deploy/k8s (unknown fields
// are errors) into the typed objects of k8s.io/api.
type k8sObjects struct {
	namespaces  []corev1.Namespace
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	services    []corev1.Service
	deployments []appsv1.Deployment
	hpas        []autoscalingv2.HorizontalPodAutoscaler
	pdbs        []policyv1.PodDisruptionBudget
}

func decodeK8s(t *testing.T, dir string, files []string) *k8sObjects {
	t.Helper()
	var o k8sObjects
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			js, err := yaml.YAMLToJSON([]byte(doc))
			require.NoError(t, err, "%s #%d", f, i)
			if string(js) == "null" {
				continue
			}
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(js, &tm))
			where := fmt.Sprintf("%s #%d (%s)", f, i, tm.Kind)
			strict := func(into any) {
				require.NoError(t, yaml.UnmarshalStrict(js, into), where)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				var x corev1.Namespace
				strict(&x)
				o.namespaces = append(o.namespaces, x)
			case "v1 ConfigMap":
				var x corev1.ConfigMap
				strict(&x)
				o.configMaps = append(o.configMaps, x)
			case "v1 Secret":
				var x corev1.Secret
				strict(&x)
				o.secrets = append(o.secrets, x)
			case "v1 Service":
				var x corev1.Service
				strict(&x)
				o.services = append(o.services, x)
			case "apps/v1 Deployment":
				var x appsv1.Deployment
				strict(&x)
				o.deployments = append(o.deployments, x)
			case "autoscaling/v2 HorizontalPodAutoscaler":
				var x autoscalingv2.HorizontalPodAutoscaler
				strict(&x)
				o.hpas = append(o.hpas, x)
			case "policy/v1 PodDisruptionBudget":
				var x policyv1.PodDisruptionBudget
				strict(&x)
				o.pdbs = append(o.pdbs, x)
			default:
				t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return &o
}

// TestKubernetesManifests decodes deploy/k8s strictly into k8s.io/api types
// and checks what makes them work together: probes on /readyz and /healthz
// at the port each binary serves, every Secret and ConfigMap key that is
// referenced exists, the HPA scales the poller Deployment (which has a CPU
// request), each PDB selects the pods of exactly one Deployment, the
// webhook Service reaches the webhook port, a grace period longer than the
// drain, and a Pollux config that loads.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(e2etest.DeployDir(t), "k8s")
	var kust struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, &kust))
	manifests, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, m := range manifests {
		if base := filepath.Base(m); base != "kustomization.yaml" && base != "nats-values.yaml" {
			want = append(want, base)
		}
	}
	require.ElementsMatch(t, want, kust.Resources, "kustomization.yaml lists every manifest")
	o := decodeK8s(t, dir, kust.Resources)

	require.Len(t, o.namespaces, 1)
	ns := o.namespaces[0].Name
	secretKeys := map[string]map[string]bool{}
	for _, s := range o.secrets {
		require.Equal(t, ns, s.Namespace)
		secretKeys[s.Name] = map[string]bool{}
		for k := range s.StringData {
			secretKeys[s.Name][k] = true
		}
		for k := range s.Data {
			secretKeys[s.Name][k] = true
		}
	}
	configKeys := map[string]map[string]string{}
	for _, c := range o.configMaps {
		require.Equal(t, ns, c.Namespace)
		configKeys[c.Name] = c.Data
	}

	deployments := map[string]appsv1.Deployment{}
	for _, d := range o.deployments {
		require.Equal(t, ns, d.Namespace)
		deployments[d.Name] = d
	}
	require.ElementsMatch(t, []string{"ingest", "poller", "webhook"}, slices.Collect(mapKeys(deployments)))
	for name, d := range deployments {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s selects its own pods", name)
		spec := d.Spec.Template.Spec
		require.NotNil(t, spec.TerminationGracePeriodSeconds)
		require.Greater(t, *spec.TerminationGracePeriodSeconds, int64(30), "%s: longer than the drain", name)
		require.Len(t, spec.Containers, 1)
		c := spec.Containers[0]
		require.Equal(t, []string{name}, c.Args, "%s runs its binary", name)

		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			for _, ref := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(e.Value, -1) {
				require.Contains(t, env, ref[1], "%s: %s refers to %s, defined before it", name, e.Name, ref[1])
			}
			env[e.Name] = e
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
				require.True(t, secretKeys[r.SecretKeyRef.Name][r.SecretKeyRef.Key], "%s: secret %s has key %s", name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
			}
		}
		providers := map[string]bool{}
		for _, ef := range c.EnvFrom {
			require.NotNil(t, ef.SecretRef, name)
			require.Contains(t, secretKeys, ef.SecretRef.Name, name)
			for k := range secretKeys[ef.SecretRef.Name] {
				providers[k] = true
			}
		}

		// The metrics port: the binary's default unless set, and the probes.
		port := defaultMetricsPort(t, name)
		if e, ok := env["POLLUX_METRICS_ADDR"]; ok {
			require.Equal(t, port, addrPort(t, e.Value), "%s: the usual metrics port", name)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		probe := func(what string, p *corev1.Probe, path string) {
			require.NotNil(t, p, "%s: %s probe", name, what)
			require.NotNil(t, p.HTTPGet, "%s: %s probe", name, what)
			require.Equal(t, path, p.HTTPGet.Path, "%s: %s probe", name, what)
			n := p.HTTPGet.Port.IntVal
			if p.HTTPGet.Port.StrVal != "" {
				n = ports[p.HTTPGet.Port.StrVal]
			}
			require.Equal(t, int32(port), n, "%s: %s probe on the metrics port", name, what)
		}
		probe("readiness", c.ReadinessProbe, "/readyz")
		probe("liveness", c.LivenessProbe, "/healthz")
		probe("startup", c.StartupProbe, "/healthz")
		require.False(t, c.Resources.Requests.Cpu().IsZero(), "%s requests CPU", name)

		// NATS: its own user, with its own password.
		u, err := url.Parse(strings.ReplaceAll(env["POLLUX_NATS_URL"].Value, "$(NATS_PASSWORD)", "pw"))
		require.NoError(t, err)
		require.Equal(t, name, u.User.Username(), "%s connects as its own user", name)
		require.Equal(t, name+"-password", env["NATS_PASSWORD"].ValueFrom.SecretKeyRef.Key)

		// The config: mounted from the ConfigMap, valid, secrets provided.
		var mountPath string
		for _, m := range c.VolumeMounts {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					mountPath = m.MountPath
					require.Contains(t, configKeys, v.ConfigMap.Name, name)
					cfgPath := env["POLLUX_CONFIG"].Value
					key, ok := strings.CutPrefix(cfgPath, mountPath+"/")
					require.True(t, ok, "%s: %s is in the mounted ConfigMap", name, cfgPath)
					data, ok := configKeys[v.ConfigMap.Name][key]
					require.True(t, ok, "%s: ConfigMap %s has key %s", name, v.ConfigMap.Name, key)
					cfg, err := config.Parse(strings.NewReader(data))
					require.NoError(t, err, "%s's Pollux config", name)
					require.Equal(t, 3, cfg.Streams.Replicas)
					for route, r := range cfg.Routes {
						for _, e := range []string{r.TokenEnv, r.WebhookSecretEnv, r.CallbackSecretEnv} {
							require.True(t, e == "" || providers[e], "%s: route %s's %s comes from a Secret", name, route, e)
						}
					}
				}
			}
		}
		require.NotEmpty(t, mountPath, "%s mounts the config", name)

		if name == "webhook" {
			require.Equal(t, int32(addrPort(t, env["POLLUX_WEBHOOK_ADDR"].Value)), ports["http"])
		}
	}

	require.Len(t, o.hpas, 1)
	hpa := o.hpas[0]
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.Equal(t, "poller", hpa.Spec.ScaleTargetRef.Name)
	require.Nil(t, deployments["poller"].Spec.Replicas, "the HPA owns the poller count")
	require.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
	require.GreaterOrEqual(t, *hpa.Spec.MinReplicas, int32(2))

	covered := map[string]bool{}
	for _, pdb := range o.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		require.NoError(t, err)
		var matched []string
		for name, d := range deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				matched = append(matched, name)
			}
		}
		require.Len(t, matched, 1, "PDB %s selects the pods of one Deployment", pdb.Name)
		covered[matched[0]] = true
	}
	require.Len(t, covered, 3, "every Deployment has a PDB")

	require.Len(t, o.services, 1)
	svc := o.services[0]
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	require.True(t, sel.Matches(labels.Set(deployments["webhook"].Spec.Template.Labels)))
	require.False(t, sel.Matches(labels.Set(deployments["poller"].Spec.Template.Labels)))
	require.Equal(t, "http", svc.Spec.Ports[0].TargetPort.StrVal)

	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
		require.NoError(t, err, "kubectl kustomize: %s", out)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// natsChartKeys are the value paths of the official NATS Helm chart (1.x)
// that nats-values.yaml may set, as the chart's own templates and tests use
// them (nats-io/k8s helm/charts/nats: files/config/*.yaml,
// files/stateful-set/nats-container.yaml, test/config_test.go,
// test/resources_test.go). A path ending in "*" takes anything below it
// (NATS config merged in, JSON patches, env, constraints by topology key).
var natsChartKeys = []string{
	"config.cluster.enabled", "config.cluster.replicas", "config.cluster.port", "config.cluster.routeURLs.*",
	"config.cluster.tls.*", "config.cluster.merge.*", "config.cluster.patch*",
	"config.jetstream.enabled", "config.jetstream.fileStore.enabled", "config.jetstream.fileStore.dir",
	"config.jetstream.fileStore.maxSize", "config.jetstream.fileStore.pvc.enabled", "config.jetstream.fileStore.pvc.size",
	"config.jetstream.fileStore.pvc.storageClassName", "config.jetstream.fileStore.pvc.merge.*",
	"config.jetstream.memoryStore.enabled", "config.jetstream.memoryStore.maxSize",
	"config.jetstream.merge.*", "config.jetstream.patch*",
	"config.monitor.enabled", "config.merge.*", "config.patch*", "config.serverNamePrefix",
	"container.image.repository", "container.image.tag", "container.image.pullPolicy", "container.image.registry",
	"container.env.*", "container.merge.*", "container.patch*",
	"reloader.env.*", "reloader.natsVolumeMountPrefixes*", "reloader.merge.*", "reloader.patch*",
	"promExporter.enabled", "promExporter.port", "promExporter.env.*", "promExporter.podMonitor.enabled",
	"podTemplate.topologySpreadConstraints.*", "podTemplate.configChecksumAnnotation", "podTemplate.merge.*", "podTemplate.patch*",
	"statefulSet.merge.*", "statefulSet.patch*", "service.enabled", "service.merge.*", "service.patch*",
	"headlessService.merge.*", "headlessService.patch*", "configMap.merge.*", "configMap.patch*",
}

// TestNATSHelmValues checks deploy/k8s/nats-values.yaml: YAML, only keys the
// chart documents, a JetStream cluster of three on file storage, the store
// cap below the volume and above the streams' reservations, and every
// Secret key it reads present in deploy/k8s/secrets.yaml.
func TestNATSHelmValues(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(e2etest.DeployDir(t), "k8s")
	b, err := os.ReadFile(filepath.Join(dir, "nats-values.yaml"))
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(b, &v))
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		if m, ok := x.(map[string]any); ok && len(m) > 0 {
			for k, sub := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
			}
			return
		}
		for _, k := range natsChartKeys {
			if k == prefix || (strings.HasSuffix(k, "*") && strings.HasPrefix(prefix, strings.TrimSuffix(k, "*"))) {
				return
			}
		}
		t.Errorf("nats-values.yaml sets %s, which the chart does not document", prefix)
	}
	walk("", v)

	get := func(path string) any {
		var x any = v
		for _, k := range strings.Split(path, ".") {
			m, ok := x.(map[string]any)
			require.True(t, ok, path)
			x = m[k]
		}
		return x
	}
	require.Equal(t, true, get("config.cluster.enabled"))
	require.EqualValues(t, 3, get("config.cluster.replicas"))
	require.Equal(t, true, get("config.jetstream.enabled"))
	pvc, maxSize := quantity(t, get("config.jetstream.fileStore.pvc.size")), quantity(t, get("config.jetstream.fileStore.maxSize"))
	require.Less(t, maxSize, pvc, "max_file_store below the volume")
	require.Greater(t, maxSize, streamsMaxBytes(), "max_file_store above the streams' max bytes")
	require.Equal(t, "../nats-accounts/accounts.conf", get("config.merge.$include"))

	o := decodeK8s(t, dir, []string{"secrets.yaml"})
	keys := map[string]bool{}
	for _, s := range o.secrets {
		for k := range s.StringData {
			keys[s.Name+"/"+k] = true
		}
	}
	env := get("container.env").(map[string]any)
	for _, user := range []string{"sys", "ingest", "poller", "webhook", "client", "admin"} {
		name := "NATS_" + strings.ToUpper(user) + "_PASSWORD"
		require.Contains(t, env, name, "the servers get %s, which accounts.conf reads", name)
		js, err := yaml.Marshal(env[name])
		require.NoError(t, err)
		var e corev1.EnvVar
		require.NoError(t, yaml.UnmarshalStrict(js, &e))
		ref := e.ValueFrom.SecretKeyRef
		require.True(t, keys[ref.Name+"/"+ref.Key], "secrets.yaml has %s/%s", ref.Name, ref.Key)
	}
}

func quantity(t *testing.T, x any) int64 {
	t.Helper()
	s, ok := x.(string)
	require.True(t, ok, "%v", x)
	m := regexp.MustCompile(`^(\d+)Gi$`).FindStringSubmatch(s)
	require.NotNil(t, m, "%q: a size in Gi", s)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return n << 30
}

// TestDockerfile lints the Dockerfile (no Docker engine here to build it):
// a golang:1.26 build stage, the four binaries built and copied into the
// runtime stage, which runs as a non-root user; and a .dockerignore that
// keeps the repository's history and local builds out of the context.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(e2etest.Root(t), "Dockerfile"))
	require.NoError(t, err)
	var stages [][]string // instructions of each stage, continuation lines joined
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "an instruction before FROM: %s", line)
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	require.Len(t, stages, 2, "a build stage and a runtime stage")
	build, runtime := strings.Join(stages[0], "\n"), stages[1]
	require.Regexp(t, `^FROM golang:1\.26(\S*)? AS build$`, stages[0][0])
	binaries := []string{"ingest", "poller", "webhook", "pollux"}
	for _, b := range binaries {
		require.Contains(t, build, "./cmd/"+b, "builds %s", b)
		_, err := os.Stat(filepath.Join(e2etest.Root(t), "cmd", b, "main.go"))
		require.NoError(t, err)
	}
	require.Contains(t, build, "CGO_ENABLED=0", "static binaries")

	var copied []string
	user := ""
	for _, ins := range runtime {
		if rest, ok := strings.CutPrefix(ins, "COPY --from=build "); ok {
			f := strings.Fields(rest)
			for _, src := range f[:len(f)-1] {
				copied = append(copied, filepath.Base(src))
			}
		}
		if rest, ok := strings.CutPrefix(ins, "USER "); ok {
			user = rest
		}
	}
	require.ElementsMatch(t, binaries, copied, "the runtime stage has the four binaries")
	require.NotEmpty(t, user, "the runtime stage sets USER")
	uid, _, _ := strings.Cut(user, ":")
	require.NotContains(t, []string{"root", "0"}, uid, "not root")
	require.NotContains(t, strings.Join(runtime, "\n"), "ENTRYPOINT", "the command names the binary")

	ignore, err := os.ReadFile(filepath.Join(e2etest.Root(t), ".dockerignore"))
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	for _, must := range []string{".git", "bin/", "**/node_modules"} {
		require.Contains(t, lines, must, ".dockerignore excludes %s", must)
	}
	for _, keep := range []string{"cmd", "internal", "pkg", "go.mod", "go.sum"} {
		require.NotContains(t, lines, keep, ".dockerignore keeps %s", keep)
		require.NotContains(t, lines, keep+"/", ".dockerignore keeps %s", keep)
	}
}
