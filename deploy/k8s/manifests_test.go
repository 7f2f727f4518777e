// Package k8s_test checks the Kubernetes manifests under deploy/k8s: every
// document decodes strictly into its typed k8s.io/api struct (so a misspelt
// field fails here, not at kubectl apply), every kustomization lists files
// that exist, and the security properties the design promises hold.
package k8s_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const kustomizationFile = "kustomization.yaml"

// manifest is one YAML document of one file.
type manifest struct {
	path  string // relative to deploy/k8s
	index int    // document number within the file
	obj   any    // *appsv1.Deployment, *corev1.Service, ...
}

func (m manifest) String() string { return fmt.Sprintf("%s#%d", m.path, m.index) }

// newObject maps apiVersion and kind to the typed struct a document must
// decode into; a kind missing here fails the test, so new kinds get a
// conscious decision (and a strict decode) rather than a silent pass.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	}
	return nil, fmt.Errorf("unknown kind %q of apiVersion %q", kind, apiVersion)
}

// decodeDocument decodes one YAML document strictly: unknown or duplicate
// fields are errors.
func decodeDocument(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("read apiVersion and kind: %w", err)
	}
	obj, err := newObject(tm.APIVersion, tm.Kind)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitDocuments splits a multi-document YAML file and drops documents that
// hold only comments and whitespace.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range separator.Split(string(data), -1) {
		empty := true
		for line := range strings.SplitSeq(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// yamlFiles lists the YAML files under deploy/k8s, kustomization files
// separately.
func yamlFiles(t *testing.T) (manifests, kustomizations []string) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case strings.HasSuffix(path, ".yml"):
			return fmt.Errorf("%s: use the .yaml extension so the checks see it", path)
		case d.Name() == kustomizationFile:
			kustomizations = append(kustomizations, path)
		case strings.HasSuffix(path, ".yaml"):
			manifests = append(manifests, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk deploy/k8s: %v", err)
	}
	if len(manifests) == 0 || len(kustomizations) == 0 {
		t.Fatalf("found %d manifests and %d kustomizations, want some of each", len(manifests), len(kustomizations))
	}
	return manifests, kustomizations
}

// loadManifests decodes every document of every manifest, failing the test
// on the first that does not decode strictly.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	paths, _ := yamlFiles(t)
	var out []manifest
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		docs := splitDocuments(data)
		if len(docs) == 0 {
			t.Fatalf("%s: no YAML documents", p)
		}
		for i, doc := range docs {
			obj, err := decodeDocument(doc)
			if err != nil {
				t.Fatalf("%s#%d: %v", p, i, err)
			}
			out = append(out, manifest{path: filepath.ToSlash(p), index: i, obj: obj})
		}
	}
	return out
}

// find returns the single object of type T named name in dir.
func find[T any](t *testing.T, ms []manifest, dir, name string) T {
	t.Helper()
	var found []T
	for _, m := range ms {
		o, ok := m.obj.(T)
		if !ok || !strings.HasPrefix(m.path, dir+"/") {
			continue
		}
		if meta, ok := any(o).(metav1.Object); ok && meta.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%T named %q under %s: found %d, want 1", zero, name, dir, len(found))
	}
	return found[0]
}

func TestDecodeDocumentStrict(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: x
          image: x
          %s:
            httpGet: {path: /, port: 80}
`
	tests := []struct {
		name    string
		doc     string
		wantErr bool
	}{
		{"valid", fmt.Sprintf(deployment, "readinessProbe"), false},
		{"typo in field", fmt.Sprintf(deployment, "readinesProbe"), true},
		{"unknown kind", "apiVersion: v1\nkind: ConfigMapp\nmetadata: {name: x}\n", true},
		{"known kind wrong version", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: x}\n", true},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n", true},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: 80}\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeDocument([]byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Errorf("decodeDocument(%s) = %v, want error %v", tt.name, err, tt.wantErr)
			}
		})
	}
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"single", "a: 1\n", 1},
		{"leading separator", "---\na: 1\n", 1},
		{"two", "a: 1\n---\nb: 2\n", 2},
		{"comment only document dropped", "# just a comment\n---\nb: 2\n---\n\n", 1},
		{"separator inside a value is not split", "a: |\n  x --- y\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(splitDocuments([]byte(tt.in))); got != tt.want {
				t.Errorf("len(splitDocuments(%q)) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, m := range loadManifests(t) {
		t.Run(m.String(), func(t *testing.T) {
			meta, ok := m.obj.(metav1.Object)
			if !ok {
				t.Fatalf("%s: %T has no object metadata", m, m.obj)
			}
			if meta.GetName() == "" {
				t.Errorf("%s: metadata.name is empty", m)
			}
		})
	}
}

// kustomization holds the fields of kustomization.yaml these manifests use;
// decoding it strictly catches typos and fields nobody here reviewed.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors,omitempty"`
		IncludeTemplates bool              `json:"includeTemplates,omitempty"`
	} `json:"labels,omitempty"`
	CommonLabels map[string]string `json:"commonLabels,omitempty"`
	Images       []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

func TestKustomizations(t *testing.T) {
	manifestPaths, kustomizations := yamlFiles(t)
	ms := loadManifests(t)
	for _, kpath := range kustomizations {
		t.Run(filepath.ToSlash(kpath), func(t *testing.T) {
			data, err := os.ReadFile(kpath)
			if err != nil {
				t.Fatal(err)
			}
			var k kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Fatalf("decode %s: %v", kpath, err)
			}
			if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
				t.Errorf("%s: apiVersion, kind = %q, %q, want kustomize.config.k8s.io/v1beta1, Kustomization", kpath, k.APIVersion, k.Kind)
			}
			if len(k.Resources) == 0 {
				t.Errorf("%s: no resources", kpath)
			}
			if k.Namespace == "" {
				t.Errorf("%s: namespace is empty, want one (the JWKS URL names it)", kpath)
			}
			dir := filepath.Dir(kpath)
			listed := map[string]bool{}
			for _, r := range k.Resources {
				p := filepath.Join(dir, r)
				listed[filepath.ToSlash(p)] = true
				st, err := os.Stat(p)
				switch {
				case err != nil:
					t.Errorf("%s: resource %q: %v", kpath, r, err)
				case st.IsDir():
					if _, err := os.Stat(filepath.Join(p, kustomizationFile)); err != nil {
						t.Errorf("%s: resource directory %q has no %s", kpath, r, kustomizationFile)
					}
				}
				if strings.HasSuffix(r, ".example.yaml") {
					t.Errorf("%s: lists %q; example files must never be applied", kpath, r)
				}
			}
			// A manifest next to the kustomization but not in it is never
			// applied: almost certainly a forgotten line.
			for _, p := range manifestPaths {
				p = filepath.ToSlash(p)
				if filepath.Dir(p) == filepath.ToSlash(dir) && !listed[p] && !strings.HasSuffix(p, ".example.yaml") {
					t.Errorf("%s: %s is not listed in resources", kpath, p)
				}
			}
			// Every images entry must name an image some listed container
			// uses, or `kustomize edit set image` silently does nothing.
			used := map[string]bool{}
			for _, m := range ms {
				if d, ok := m.obj.(*appsv1.Deployment); ok && listed[m.path] {
					for _, c := range allContainers(&d.Spec.Template.Spec) {
						name, _, _ := strings.Cut(c.Image, "@")
						if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
							name = name[:i]
						}
						used[name] = true
					}
				}
			}
			for _, img := range k.Images {
				if !used[img.Name] {
					t.Errorf("%s: images entry %q matches no container image", kpath, img.Name)
				}
			}
		})
	}
}

// allContainers returns the init containers and the containers of a pod.
func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return slices.Concat(spec.InitContainers, spec.Containers)
}

func TestReadmeMentionsEveryDirectory(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, kustomizations := yamlFiles(t)
	for _, k := range kustomizations {
		dir := "deploy/k8s/" + filepath.ToSlash(filepath.Dir(k))
		if !bytes.Contains(readme, []byte("kubectl apply -k "+dir)) {
			t.Errorf("README.md does not show kubectl apply -k %s", dir)
		}
	}
}
