package k8s_test

// The security and wiring properties the design promises: hardened
// containers, the issuer's Secrets and probes, the verifier as a native
// sidecar, and the NetworkPolicy that leaves only the verifier reachable.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPodSecurity(t *testing.T) {
	for _, m := range loadManifests(t) {
		d, ok := m.obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		t.Run(m.String(), func(t *testing.T) {
			spec := &d.Spec.Template.Spec
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("%s: automountServiceAccountToken = %v, want false", m, show(spec.AutomountServiceAccountToken))
			}
			if spec.HostNetwork || spec.HostPID || spec.HostIPC {
				t.Errorf("%s: pod shares a host namespace", m)
			}
			podSeccomp := spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil &&
				spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
			for _, c := range allContainers(spec) {
				sc := c.SecurityContext
				if sc == nil {
					t.Errorf("%s: container %q has no securityContext", m, c.Name)
					continue
				}
				if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
					t.Errorf("%s: container %q runAsNonRoot = %v, want true", m, c.Name, show(sc.RunAsNonRoot))
				}
				if sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
					t.Errorf("%s: container %q runAsUser = %v, want 65532", m, c.Name, show(sc.RunAsUser))
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s: container %q readOnlyRootFilesystem = %v, want true", m, c.Name, show(sc.ReadOnlyRootFilesystem))
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s: container %q allowPrivilegeEscalation = %v, want false", m, c.Name, show(sc.AllowPrivilegeEscalation))
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("%s: container %q privileged = true, want false", m, c.Name)
				}
				if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
					t.Errorf("%s: container %q capabilities = %+v, want drop [ALL] and no add", m, c.Name, sc.Capabilities)
				}
				containerSeccomp := sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
				if !podSeccomp && !containerSeccomp {
					t.Errorf("%s: container %q seccompProfile is not RuntimeDefault", m, c.Name)
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("%s: container %q resources = %+v, want cpu and memory requests and a memory limit", m, c.Name, c.Resources)
				}
				// Every long-running container (an app container, or an
				// init container that is a native sidecar) is probed for
				// both: readiness gates traffic, liveness restarts a hang.
				if c.ReadinessProbe == nil {
					t.Errorf("%s: container %q has no readinessProbe", m, c.Name)
				}
				if c.LivenessProbe == nil {
					t.Errorf("%s: container %q has no livenessProbe", m, c.Name)
				}
			}
		})
	}
}

// show renders an optional value for failure messages.
func show[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// probePort resolves a probe's HTTP port (a number, or a name of one of
// c's ports) to a number.
func probePort(c corev1.Container, p *corev1.Probe) (path string, port int32, err error) {
	if p == nil || p.HTTPGet == nil {
		return "", 0, errors.New("not an httpGet probe")
	}
	if p.HTTPGet.Port.Type == intstr.Int {
		return p.HTTPGet.Path, p.HTTPGet.Port.IntVal, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.HTTPGet.Port.StrVal {
			return p.HTTPGet.Path, cp.ContainerPort, nil
		}
	}
	return "", 0, fmt.Errorf("port %q is not a port of container %q", p.HTTPGet.Port.StrVal, c.Name)
}

// env returns the value of the environment variable name in c.
func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// selects reports whether every selector label is on the pod.
func selects(selector, podLabels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if podLabels[k] != v {
			return false
		}
	}
	return true
}

func TestIssuer(t *testing.T) {
	ms := loadManifests(t)
	const dir = "base/issuer"
	d := find[*appsv1.Deployment](t, ms, dir, "issuer")
	spec := d.Spec.Template.Spec
	pod := d.Spec.Template.Labels

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("issuer replicas = %v, want 2", show(d.Spec.Replicas))
	}
	if !selects(d.Spec.Selector.MatchLabels, pod) {
		t.Errorf("issuer selector %v does not select its pod labels %v", d.Spec.Selector.MatchLabels, pod)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < 10 {
		t.Errorf("issuer terminationGracePeriodSeconds = %v, want at least 10", show(spec.TerminationGracePeriodSeconds))
	}
	if len(spec.TopologySpreadConstraints) == 0 && (spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil) {
		t.Error("issuer pods have neither topologySpreadConstraints nor podAntiAffinity")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("issuer containers = %d, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !strings.HasPrefix(c.Image, "ghcr.io/palisade-auth/issuer:") {
		t.Errorf("issuer image = %q, want ghcr.io/palisade-auth/issuer:TAG", c.Image)
	}
	if !slices.Equal(c.Args, []string{"serve"}) {
		t.Errorf("issuer args = %q, want [serve]", c.Args)
	}

	// The database URL comes from the Secret, never a literal.
	if e, ok := env(c, "ISSUER_DATABASE_URL"); !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "issuer-secrets" || e.ValueFrom.SecretKeyRef.Key != "database-url" {
		t.Errorf("issuer ISSUER_DATABASE_URL = %+v, want secretKeyRef issuer-secrets/database-url", e)
	}
	// Mails go out by SMTP (log mode would put live reset links in the
	// log), through a relay URL from the Secret: it may hold a password.
	if e, _ := env(c, "ISSUER_MAIL_MODE"); e.Value != "smtp" {
		t.Errorf("issuer ISSUER_MAIL_MODE = %q, want smtp", e.Value)
	}
	if e, ok := env(c, "ISSUER_SMTP_URL"); !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "issuer-secrets" || e.ValueFrom.SecretKeyRef.Key != "smtp-url" {
		t.Errorf("issuer ISSUER_SMTP_URL = %+v, want secretKeyRef issuer-secrets/smtp-url", e)
	}
	for _, name := range []string{"ISSUER_MAIL_FROM", "ISSUER_PUBLIC_URL"} {
		if e, _ := env(c, name); e.Value == "" {
			t.Errorf("issuer %s is not set", name)
		}
	}
	// The KEK file lies in a read-only mount of the issuer-kek Secret.
	kek, _ := env(c, "ISSUER_KEK_FILE")
	var kekMounted bool
	for _, vm := range c.VolumeMounts {
		if !strings.HasPrefix(kek.Value, vm.MountPath+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil && v.Secret.SecretName == "issuer-kek" && vm.ReadOnly {
				kekMounted = true
			}
		}
	}
	if !kekMounted || !strings.HasPrefix(kek.Value, "/var/run/secrets/palisade/kek/") {
		t.Errorf("issuer ISSUER_KEK_FILE = %q, want a file under the read-only mount /var/run/secrets/palisade/kek of Secret issuer-kek", kek.Value)
	}
	for _, e := range c.Env {
		if e.Name != "ISSUER_DATABASE_URL" && strings.Contains(strings.ToLower(e.Value), "postgres://") {
			t.Errorf("issuer env %s holds a database URL literal", e.Name)
		}
		if v := strings.ToLower(e.Value); strings.HasPrefix(v, "smtp://") || strings.HasPrefix(v, "smtps://") {
			t.Errorf("issuer env %s holds an SMTP URL literal", e.Name)
		}
	}
	// Probes from the kubelet cannot reach a loopback admin listener.
	if e, _ := env(c, "ISSUER_ADMIN_LISTEN"); e.Value != ":9090" {
		t.Errorf("issuer ISSUER_ADMIN_LISTEN = %q, want \":9090\"", e.Value)
	}

	probes := []struct {
		name     string
		probe    *corev1.Probe
		wantPath string
		wantPort int32
	}{
		{"readinessProbe", c.ReadinessProbe, "/health", 8080},
		{"livenessProbe", c.LivenessProbe, "/healthz", 9090},
		{"startupProbe", c.StartupProbe, "/healthz", 9090},
	}
	for _, p := range probes {
		path, port, err := probePort(c, p.probe)
		if err != nil || path != p.wantPath || port != p.wantPort {
			t.Errorf("issuer %s = %s:%d (%v), want %s:%d", p.name, path, port, err, p.wantPath, p.wantPort)
		}
	}
	if name := c.ReadinessProbe.HTTPGet.Port.StrVal; name != "http" {
		t.Errorf("issuer readinessProbe port = %q, want the named port http", name)
	}
	if name := c.LivenessProbe.HTTPGet.Port.StrVal; name != "admin" {
		t.Errorf("issuer livenessProbe port = %q, want the named port admin", name)
	}

	svc := find[*corev1.Service](t, ms, dir, "issuer")
	if svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("issuer Service type = %q, want ClusterIP", svc.Spec.Type)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].Name != "http" {
		t.Errorf("issuer Service ports = %+v, want one port 8080 named http", svc.Spec.Ports)
	}
	if !selects(svc.Spec.Selector, pod) {
		t.Errorf("issuer Service selector %v does not select pod labels %v", svc.Spec.Selector, pod)
	}

	pdb := find[*policyv1.PodDisruptionBudget](t, ms, dir, "issuer")
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) {
		t.Errorf("issuer PDB minAvailable = %v, want 1", show(pdb.Spec.MinAvailable))
	}
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, pod) {
		t.Errorf("issuer PDB selector %v does not select pod labels %v", pdb.Spec.Selector, pod)
	}

	sa := find[*corev1.ServiceAccount](t, ms, dir, "issuer")
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("issuer serviceAccountName = %q, want %q", spec.ServiceAccountName, sa.Name)
	}
}

func TestSecretsAreExamplesOnly(t *testing.T) {
	var seen int
	for _, m := range loadManifests(t) {
		s, ok := m.obj.(*corev1.Secret)
		if !ok {
			continue
		}
		seen++
		if !strings.HasSuffix(m.path, ".example.yaml") {
			t.Errorf("%s: Secret %q outside a *.example.yaml file", m, s.Name)
		}
		if len(s.Data) > 0 {
			t.Errorf("%s: Secret %q has data; examples use stringData placeholders only", m, s.Name)
		}
		for k, v := range s.StringData {
			if v != "REPLACE_ME" {
				t.Errorf("%s: Secret %q key %q = %q, want REPLACE_ME", m, s.Name, k, v)
			}
		}
	}
	if seen != 2 {
		t.Errorf("example Secrets = %d, want 2 (issuer-secrets, issuer-kek)", seen)
	}
}

func TestExampleApp(t *testing.T) {
	ms := loadManifests(t)
	const dir = "example-app"
	d := find[*appsv1.Deployment](t, ms, dir, "example-app")
	spec := d.Spec.Template.Spec
	pod := d.Spec.Template.Labels

	if len(spec.InitContainers) != 1 {
		t.Fatalf("example-app initContainers = %d, want 1 (the verifier sidecar)", len(spec.InitContainers))
	}
	v := spec.InitContainers[0]
	if v.Name != "verifier" {
		t.Errorf("example-app initContainers[0].name = %q, want verifier", v.Name)
	}
	if v.RestartPolicy == nil || *v.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("verifier restartPolicy = %v, want Always (a native sidecar)", show(v.RestartPolicy))
	}
	if !slices.Equal(v.Args, []string{"serve"}) {
		t.Errorf("verifier args = %q, want [serve]", v.Args)
	}
	wantEnv := map[string]string{
		"VERIFIER_UPSTREAM":     "http://127.0.0.1:3000",
		"VERIFIER_JWKS_URL":     "http://issuer.palisade.svc:8080/.well-known/jwks.json",
		"VERIFIER_LISTEN":       ":8081",
		"VERIFIER_ADMIN_LISTEN": ":9091",
	}
	for name, want := range wantEnv {
		if e, _ := env(v, name); e.Value != want {
			t.Errorf("verifier %s = %q, want %q", name, e.Value, want)
		}
	}

	// The verifier must accept exactly what the issuer issues.
	issuer := find[*appsv1.Deployment](t, ms, "base/issuer", "issuer").Spec.Template.Spec.Containers[0]
	for _, pair := range [][2]string{{"VERIFIER_ISSUER", "ISSUER_ISSUER_URL"}, {"VERIFIER_AUDIENCE", "ISSUER_AUDIENCE"}} {
		got, _ := env(v, pair[0])
		want, _ := env(issuer, pair[1])
		if got.Value == "" || got.Value != want.Value {
			t.Errorf("verifier %s = %q, want the issuer's %s %q", pair[0], got.Value, pair[1], want.Value)
		}
	}

	probes := []struct {
		name     string
		probe    *corev1.Probe
		wantPath string
	}{
		{"startupProbe", v.StartupProbe, "/readyz"},
		{"readinessProbe", v.ReadinessProbe, "/readyz"},
		{"livenessProbe", v.LivenessProbe, "/healthz"},
	}
	for _, p := range probes {
		path, port, err := probePort(v, p.probe)
		if err != nil || path != p.wantPath || port != 9091 {
			t.Errorf("verifier %s = %s:%d (%v), want %s:9091", p.name, path, port, err, p.wantPath)
		}
	}

	// The app, bound to loopback, is probed through the verifier's public
	// path; its liveness tolerates a verifier restart (the verifier's own
	// liveness window plus its startup) before it restarts a healthy app.
	app := spec.Containers[0]
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"readinessProbe", app.ReadinessProbe}, {"livenessProbe", app.LivenessProbe}} {
		path, port, err := probePort(app, p.probe)
		if err != nil || path != "/healthz" || port != 8081 {
			t.Errorf("app %s = %s:%d (%v), want /healthz:8081 (the verifier's public path)", p.name, path, port, err)
		}
	}
	if l := app.LivenessProbe; l != nil && v.LivenessProbe != nil {
		appWindow := l.PeriodSeconds * l.FailureThreshold
		verifierWindow := v.LivenessProbe.PeriodSeconds * v.LivenessProbe.FailureThreshold
		if appWindow <= 2*verifierWindow {
			t.Errorf("app liveness gives up after %ds, want more than twice the verifier's %ds, so a verifier restart does not restart the app", appWindow, verifierWindow)
		}
	}
	if !slices.Contains(v.Args, "serve") || !slices.ContainsFunc(v.Env, func(e corev1.EnvVar) bool {
		return e.Name == "VERIFIER_PUBLIC_PATH" && e.Value == "/healthz"
	}) {
		t.Errorf("verifier env lacks VERIFIER_PUBLIC_PATH=/healthz, which the app's probes go through")
	}

	// The app is reachable only through the verifier: it publishes no port.
	for _, c := range spec.Containers {
		if len(c.Ports) > 0 {
			t.Errorf("example-app container %q ports = %+v, want none (bound to loopback)", c.Name, c.Ports)
		}
	}

	svc := find[*corev1.Service](t, ms, dir, "example-app")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(8081) {
		t.Errorf("example-app Service ports = %+v, want 80 -> 8081 (the verifier)", svc.Spec.Ports)
	}
	if !selects(svc.Spec.Selector, pod) {
		t.Errorf("example-app Service selector %v does not select pod labels %v", svc.Spec.Selector, pod)
	}
}

func TestNetworkPolicy(t *testing.T) {
	ms := loadManifests(t)
	d := find[*appsv1.Deployment](t, ms, "example-app", "example-app")
	np := find[*networkingv1.NetworkPolicy](t, ms, "example-app", "example-app")

	if len(np.Spec.PodSelector.MatchExpressions) > 0 || !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy podSelector %+v does not select the app pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("NetworkPolicy policyTypes = %v, want Ingress", np.Spec.PolicyTypes)
	}
	var proxyOpen bool
	for i, rule := range np.Spec.Ingress {
		// A rule without ports opens every port, the app's included.
		if len(rule.Ports) == 0 {
			t.Errorf("NetworkPolicy ingress[%d] has no ports: it allows every port", i)
		}
		for _, p := range rule.Ports {
			if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
				t.Errorf("NetworkPolicy ingress[%d] port %+v, want a single TCP port", i, p)
				continue
			}
			switch *p.Port {
			case intstr.FromInt32(8081):
				proxyOpen = true
			case intstr.FromInt32(9091):
				// Metrics only from the monitoring namespace.
				if !fromNamespacesOnly(rule.From) {
					t.Errorf("NetworkPolicy ingress[%d] opens 9091 to %+v, want only a labelled namespaceSelector", i, rule.From)
				}
			default:
				t.Errorf("NetworkPolicy ingress[%d] opens port %s, want only 8081 (and 9091 for monitoring)", i, p.Port.String())
			}
		}
	}
	if !proxyOpen {
		t.Error("NetworkPolicy does not allow ingress to the verifier port 8081")
	}
}

// fromNamespacesOnly reports whether peers are non-empty and each selects
// namespaces by label, without IP blocks or pod selectors that would widen
// the rule.
func fromNamespacesOnly(peers []networkingv1.NetworkPolicyPeer) bool {
	if len(peers) == 0 {
		return false
	}
	for _, p := range peers {
		if p.IPBlock != nil || p.PodSelector != nil || p.NamespaceSelector == nil || len(p.NamespaceSelector.MatchLabels) == 0 {
			return false
		}
	}
	return true
}
