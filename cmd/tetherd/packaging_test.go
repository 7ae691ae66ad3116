package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	tether "github.com/tether-php/tether"
)

// TestKubernetesExample keeps packaging/kubernetes/tether.yaml working: its
// tetherd config validates, and php-fpm and tetherd share the directory of
// the socket the config names, with TETHER_SOCKET pointing at it.
func TestKubernetesExample(t *testing.T) {
	raw, err := os.ReadFile("../../packaging/kubernetes/tether.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type mount struct {
		Name      string
		MountPath string `yaml:"mountPath"`
	}
	type container struct {
		Name         string
		Args         []string
		Env          []struct{ Name, Value string }
		VolumeMounts []mount `yaml:"volumeMounts"`
	}
	var config string
	var containers []container
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc struct {
			Kind       string
			StringData map[string]string `yaml:"stringData"`
			Spec       struct {
				Template struct {
					Spec struct{ Containers []container }
				}
			}
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch doc.Kind {
		case "Secret":
			config = doc.StringData["tetherd.toml"]
		case "Deployment":
			containers = doc.Spec.Template.Spec.Containers
		}
	}
	if config == "" || len(containers) != 2 {
		t.Fatalf("want a Secret with tetherd.toml and a Deployment of two containers; got %d containers", len(containers))
	}
	file := filepath.Join(t.TempDir(), "tetherd.toml")
	os.WriteFile(file, []byte(config), 0o600)
	cfg, err := tether.ReadConfigFile(file)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("the example's tetherd.toml: %v", err)
	}
	runDir := path.Dir(cfg.Server.Socket)
	mounted := map[string]string{}
	for _, c := range containers {
		for _, m := range c.VolumeMounts {
			if m.MountPath == runDir {
				mounted[c.Name] = m.Name
			}
		}
		for _, e := range c.Env {
			if e.Name == "TETHER_SOCKET" && e.Value != cfg.Server.Socket {
				t.Errorf("%s: TETHER_SOCKET=%s, the socket is %s", c.Name, e.Value, cfg.Server.Socket)
			}
		}
	}
	if mounted["tetherd"] == "" || mounted["tetherd"] != mounted["php-fpm"] {
		t.Errorf("tetherd and php-fpm must mount one volume at %s: %v", runDir, mounted)
	}
}
