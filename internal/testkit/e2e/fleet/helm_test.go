package fleet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/e2e/e2etest"
)

// The chart under test, from the repository's root.
const chartDir = "deploy/helm/pollux"

// helmBin finds helm: bin/helm (make tools installs the Makefile's HELM
// there), else one on the PATH, else it installs the Makefile's version into
// bin/ from the Go module proxy the way make tools does. A test that needs it
// is skipped only when none can be had.
func helmBin(t *testing.T) string {
	t.Helper()
	helm.once.Do(func() {
		bin := filepath.Join(e2etest.Root(t), "bin")
		if _, err := os.Stat(filepath.Join(bin, "helm")); err == nil {
			helm.path = filepath.Join(bin, "helm")
			return
		}
		if p, err := exec.LookPath("helm"); err == nil {
			helm.path = p
			return
		}
		mk, err := os.ReadFile(filepath.Join(e2etest.Root(t), "Makefile"))
		if err != nil {
			helm.err = err
			return
		}
		m := regexp.MustCompile(`(?m)^HELM\s*\?=\s*(\S+)`).FindSubmatch(mk)
		if m == nil {
			helm.err = os.ErrNotExist
			return
		}
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+string(m[1]))
		cmd.Env = append(os.Environ(), "GOBIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			helm.skip = "helm " + string(m[1]) + " is not in bin/ nor on the PATH, and installing it failed (make tools installs it): " + err.Error() + ": " + string(out)
			return
		}
		helm.path = filepath.Join(bin, "helm")
	})
	if helm.skip != "" {
		t.Skip(helm.skip)
	}
	require.NoError(t, helm.err)
	return helm.path
}

var helm struct {
	once       sync.Once
	path, skip string
	err        error
}

// helmRun runs helm in the repository's root with its home directories in
// a temporary one, and returns its standard output.
func helmRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = e2etest.Root(t)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &helmError{err: err, stderr: stderr.String()}
	}
	return string(out), nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

// helmTemplate renders the chart and strictly decodes every object (unknown
// fields are errors) into the typed objects of k8s.io/api.
func helmTemplate(t *testing.T, args ...string) *k8sObjects {
	t.Helper()
	out, err := helmRun(t, append([]string{"template"}, append(args, chartDir)...)...)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rendered.yaml"), []byte(out), 0o600))
	return decodeK8s(t, dir, []string{"rendered.yaml"})
}

// byComponent indexes objects by their app.kubernetes.io/component label.
func byComponent[T any](t *testing.T, objs []T, meta func(*T) metav1.ObjectMeta) map[string]T {
	t.Helper()
	out := map[string]T{}
	for i := range objs {
		c := meta(&objs[i]).Labels["app.kubernetes.io/component"]
		require.NotEmpty(t, c, "%s has a component label", meta(&objs[i]).Name)
		require.NotContains(t, out, c, "one object of component %s", c)
		out[c] = objs[i]
	}
	return out
}

func deploymentMeta(d *appsv1.Deployment) metav1.ObjectMeta { return d.ObjectMeta }

// env indexes a container's environment by name.
func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// checkChart checks what makes the rendered objects work together, as
// TestKubernetesManifests does for deploy/k8s: each Deployment in the
// release's namespace runs its binary, selects its own pods, probes
// /healthz and /readyz on the port its binary serves metrics on, mounts the
// ConfigMap holding a Pollux config that loads, and has a grace period
// longer than the drain; each PDB selects one Deployment's pods, the
// webhook Service only the receivers.
func checkChart(t *testing.T, o *k8sObjects, namespace string) map[string]appsv1.Deployment {
	t.Helper()
	deployments := byComponent(t, o.deployments, deploymentMeta)
	require.ElementsMatch(t, []string{"ingest", "poller", "webhook"}, slices.Collect(mapKeys(deployments)))
	require.Len(t, o.configMaps, 1)
	cm := o.configMaps[0]
	require.Equal(t, namespace, cm.Namespace)
	for name, d := range deployments {
		require.Equal(t, namespace, d.Namespace, name)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s selects its own pods", name)
		for other, od := range deployments {
			require.Equal(t, other == name, sel.Matches(labels.Set(od.Spec.Template.Labels)), "%s's selector and %s's pods", name, other)
		}
		spec := d.Spec.Template.Spec
		require.Greater(t, *spec.TerminationGracePeriodSeconds, int64(30), "%s: longer than the drain", name)
		require.Len(t, spec.Containers, 1)
		c := spec.Containers[0]
		require.Equal(t, []string{name}, c.Args, "%s runs its binary", name)
		env := envOf(c)
		port := defaultMetricsPort(t, name)
		require.Equal(t, port, addrPort(t, env["POLLUX_METRICS_ADDR"].Value), "%s: the usual metrics port", name)
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for what, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe, "/healthz ": c.StartupProbe} {
			require.NotNil(t, p, "%s: a %s probe", name, what)
			require.Equal(t, strings.TrimSpace(what), p.HTTPGet.Path, name)
			require.Equal(t, int32(port), ports[p.HTTPGet.Port.StrVal], "%s: %s probe on the metrics port", name, what)
		}
		require.Equal(t, "true", d.Spec.Template.Annotations["prometheus.io/scrape"])
		require.Equal(t, env["POLLUX_METRICS_ADDR"].Value, ":"+d.Spec.Template.Annotations["prometheus.io/port"], "%s is scraped on its metrics port", name)
		require.NotEmpty(t, d.Spec.Template.Annotations["checksum/config"], "%s restarts when the config changes", name)

		require.Len(t, spec.Volumes, 1)
		require.Equal(t, cm.Name, spec.Volumes[0].ConfigMap.Name, "%s mounts the config", name)
		require.Len(t, c.VolumeMounts, 1)
		key, ok := strings.CutPrefix(env["POLLUX_CONFIG"].Value, c.VolumeMounts[0].MountPath+"/")
		require.True(t, ok, "%s: POLLUX_CONFIG is in the mounted ConfigMap", name)
		_, err = config.Parse(strings.NewReader(cm.Data[key]))
		require.NoError(t, err, "%s's Pollux config", name)
		if name == "webhook" {
			require.Equal(t, int32(addrPort(t, env["POLLUX_WEBHOOK_ADDR"].Value)), ports["http"])
		}
	}
	for _, pdb := range o.pdbs {
		require.Equal(t, namespace, pdb.Namespace)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		require.NoError(t, err)
		var matched []string
		for name, d := range deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				matched = append(matched, name)
			}
		}
		require.Len(t, matched, 1, "PDB %s selects the pods of one Deployment", pdb.Name)
	}
	require.Len(t, o.services, 1)
	svc := o.services[0]
	require.Equal(t, namespace, svc.Namespace)
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for name, d := range deployments {
		require.Equal(t, name == "webhook", sel.Matches(labels.Set(d.Spec.Template.Labels)), "the webhook Service and %s's pods", name)
	}
	require.Equal(t, "http", svc.Spec.Ports[0].TargetPort.StrVal)
	return deployments
}

// TestHelmChartLint runs helm lint --strict on the chart.
func TestHelmChartLint(t *testing.T) {
	t.Parallel()
	out, err := helmRun(t, "lint", "--strict", chartDir)
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, "0 chart(s) failed")
}

// TestHelmChartDefaults renders deploy/helm/pollux with its defaults and
// checks it as TestKubernetesManifests checks deploy/k8s, and that it
// deploys what deploy/k8s does: the same image, NATS users and secrets,
// probes, ports, resources, security contexts, autoscaling, disruption
// budgets, webhook Service and Pollux config.
func TestHelmChartDefaults(t *testing.T) {
	t.Parallel()
	o := helmTemplate(t, "pollux", "--namespace", "pollux")
	deployments := checkChart(t, o, "pollux")

	dir := filepath.Join(e2etest.DeployDir(t), "k8s")
	k := decodeK8s(t, dir, []string{"configmap.yaml", "ingest.yaml", "poller.yaml", "webhook.yaml"})
	kd := map[string]appsv1.Deployment{}
	for _, d := range k.deployments {
		kd[d.Name] = d
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(e2etest.Root(t), chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	mk, err := os.ReadFile(filepath.Join(e2etest.Root(t), "Makefile"))
	require.NoError(t, err)
	image := regexp.MustCompile(`(?m)^IMAGE\s*\?=\s*(\S+)`).FindSubmatch(mk)
	require.NotNil(t, image, "the Makefile names the image")

	for name, d := range deployments {
		c, kc := d.Spec.Template.Spec.Containers[0], kd[name].Spec.Template.Spec.Containers[0]
		require.Equal(t, string(image[1])+":"+chart.AppVersion, c.Image, "%s: make image's name at the chart's appVersion", name)
		require.Equal(t, kc.Image, c.Image, "%s: deploy/k8s runs the same image", name)
		env, kenv := envOf(c), envOf(kc)
		for _, e := range []string{"POLLUX_CONFIG", "POLLUX_METRICS_ADDR", "NATS_PASSWORD", "POLLUX_NATS_URL", "POLLUX_WEBHOOK_ADDR"} {
			require.Equal(t, kenv[e], env[e], "%s: %s as in deploy/k8s", name, e)
		}
		require.Equal(t, kc.EnvFrom, c.EnvFrom, name)
		require.Equal(t, kc.Ports, c.Ports, name)
		require.Equal(t, kc.StartupProbe, c.StartupProbe, name)
		require.Equal(t, kc.LivenessProbe, c.LivenessProbe, name)
		require.Equal(t, kc.ReadinessProbe, c.ReadinessProbe, name)
		require.True(t, kc.Resources.Requests.Cpu().Equal(*c.Resources.Requests.Cpu()), name)
		require.True(t, kc.Resources.Limits.Memory().Equal(*c.Resources.Limits.Memory()), name)
		require.Equal(t, kc.SecurityContext, c.SecurityContext, name)
		require.Equal(t, kc.VolumeMounts, c.VolumeMounts, name)
		spec, kspec := d.Spec.Template.Spec, kd[name].Spec.Template.Spec
		require.Equal(t, kspec.SecurityContext, spec.SecurityContext, name)
		require.Equal(t, kspec.TerminationGracePeriodSeconds, spec.TerminationGracePeriodSeconds, name)
		require.Equal(t, kspec.AutomountServiceAccountToken, spec.AutomountServiceAccountToken, name)
		require.Equal(t, kd[name].Spec.Replicas, d.Spec.Replicas, "%s: replicas as in deploy/k8s (the poller's are the HPA's)", name)
	}

	require.Len(t, o.hpas, 1)
	require.Equal(t, deployments["poller"].Name, o.hpas[0].Spec.ScaleTargetRef.Name)
	require.Equal(t, k.hpas[0].Spec.MinReplicas, o.hpas[0].Spec.MinReplicas)
	require.Equal(t, k.hpas[0].Spec.MaxReplicas, o.hpas[0].Spec.MaxReplicas)
	require.Equal(t, k.hpas[0].Spec.Metrics, o.hpas[0].Spec.Metrics)
	require.Equal(t, k.hpas[0].Spec.Behavior, o.hpas[0].Spec.Behavior)
	require.Len(t, o.pdbs, 3)
	for _, pdb := range o.pdbs {
		require.Equal(t, k.pdbs[0].Spec.MinAvailable, pdb.Spec.MinAvailable)
	}
	require.Equal(t, k.services[0].Spec.Ports, o.services[0].Spec.Ports)

	want, err := config.Parse(strings.NewReader(k.configMaps[0].Data["pollux.yaml"]))
	require.NoError(t, err)
	got, err := config.Parse(strings.NewReader(o.configMaps[0].Data["pollux.yaml"]))
	require.NoError(t, err)
	require.Equal(t, want, got, "the chart's default config is deploy/k8s's")
}

// TestHelmChartValues renders the chart with every value that shapes it
// changed and checks each took effect, and that a missing config fails the
// render with a message saying how to give it.
func TestHelmChartValues(t *testing.T) {
	t.Parallel()
	defaults := helmTemplate(t, "pollux", "--namespace", "pollux")
	o := helmTemplate(t, "prod", "--namespace", "jobs",
		"--set", `image.repository=registry.internal/pollux,image.tag=v9.9.9,image.pullPolicy=Always`,
		"--set", `nats.url=nats://a:4222\,nats://b:4222,nats.passwordSecret=,providersSecret=`,
		"--set", `ingest.replicas=3,poller.autoscaling.enabled=false,poller.replicas=4,webhook.replicas=5`,
		"--set", `podDisruptionBudget.enabled=false,webhook.service.port=8443,logLevel=debug`,
		"--set-file", "config=deploy/pollux.yaml")
	deployments := checkChart(t, o, "jobs")

	require.Empty(t, o.hpas, "no autoscaler")
	require.Empty(t, o.pdbs, "no disruption budgets")
	replicas := map[string]int32{"ingest": 3, "poller": 4, "webhook": 5}
	for name, d := range deployments {
		require.Equal(t, "prod-pollux-"+name, d.Name)
		require.Equal(t, replicas[name], *d.Spec.Replicas, name)
		c := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, "registry.internal/pollux:v9.9.9", c.Image)
		require.Equal(t, corev1.PullAlways, c.ImagePullPolicy)
		require.Equal(t, "v9.9.9", d.Labels["app.kubernetes.io/version"])
		env := envOf(c)
		require.NotContains(t, env, "NATS_PASSWORD", "%s: no user without a password Secret", name)
		require.Equal(t, "nats://a:4222,nats://b:4222", env["POLLUX_NATS_URL"].Value, name)
		require.Equal(t, "debug", env["POLLUX_LOG_LEVEL"].Value, name)
		require.Empty(t, c.EnvFrom, name)
		require.NotEqual(t, defaults.deployments[0].Spec.Template.Annotations["checksum/config"],
			d.Spec.Template.Annotations["checksum/config"], "%s: another config, another checksum", name)
	}
	file, err := os.ReadFile(filepath.Join(e2etest.DeployDir(t), "pollux.yaml"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(file)), strings.TrimSpace(o.configMaps[0].Data["pollux.yaml"]), "the config given")
	require.Equal(t, int32(8443), o.services[0].Spec.Ports[0].Port)

	// With passwords, each service connects as its own user to every server.
	o = helmTemplate(t, "pollux", "--set", `nats.url=nats://a:4222\,nats://b:4222`)
	for name, d := range byComponent(t, o.deployments, deploymentMeta) {
		env := envOf(d.Spec.Template.Spec.Containers[0])
		require.Equal(t, name+"-password", env["NATS_PASSWORD"].ValueFrom.SecretKeyRef.Key)
		require.Equal(t, "nats://"+name+":$(NATS_PASSWORD)@a:4222,nats://"+name+":$(NATS_PASSWORD)@b:4222", env["POLLUX_NATS_URL"].Value)
	}

	_, err = helmRun(t, "template", "pollux", chartDir, "--set", "config=")
	require.Error(t, err)
	require.Contains(t, err.Error(), "config is required: pass your pollux.yaml with --set-file config=")
}
