package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gosql "github.com/go-sql-driver/mysql"
)

// backendConfig writes a config of one sqlite default backend and the given
// [backends.*] tables, and returns its path.
func backendConfig(t *testing.T, backends string) string {
	t.Helper()
	dir := t.TempDir()
	path := writeConfig(t, dir, "")
	cfg := strings.Replace(string(mustRead(t, path)), "[log]\n", "[log]\nfile = \""+filepath.Join(dir, "tetherd.log")+"\"\n", 1)
	if err := os.WriteFile(path, []byte(cfg+backends), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testDSN returns the DSN an environment variable gives: the test skips
// without it, or fails with TETHER_REQUIRE_BACKENDS=1.
func testDSN(t *testing.T, env string) string {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		if os.Getenv("TETHER_REQUIRE_BACKENDS") == "1" {
			t.Fatalf("%s is not set and TETHER_REQUIRE_BACKENDS=1", env)
		}
		t.Skipf("%s is not set", env)
	}
	return dsn
}

// wrongPassword returns dsn (go-sql-driver/mysql's format, or a libpq
// connection string or URL) with a password the server refuses.
func wrongPassword(t *testing.T, typ, dsn string) string {
	t.Helper()
	switch {
	case typ == "mysql":
		c, err := gosql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		c.Passwd = "not-the-password"
		return c.FormatDSN()
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), "not-the-password")
		return u.String()
	default:
		return dsn + " password=not-the-password" // the last of a key wins
	}
}

func runCheck(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	err := m.Run(context.Background(), args)
	return out.String() + errOut.String(), err
}

func TestMain_CheckBuildsBackends(t *testing.T) {
	cases := []struct {
		name, backend string
		want          []string // in the output, besides the backend's name
	}{
		{"MySQLDSN", "type = \"mysql\"\ndsn = \"app:pw@tcp(localhost:3306/app\"", []string{"dsn"}},
		{"PostgresDSN", "type = \"postgres\"\ndsn = \"host=/run/postgresql port=notaport dbname=app\"", []string{"dsn", "port"}},
		{"SQLiteDSN", "type = \"sqlite\"\ndsn = \"var/x.db?_journal_mode=%zz\"", []string{"dsn"}},
		{"CassandraDSN", "type = \"cassandra\"\ndsn = \"cassandra://127.0.0.1/ks?consistency=mostly\"", []string{"consistency"}},
		{"BigtableDSN", "type = \"bigtable\"\ndsn = \"bigtable://project-only\"", []string{"dsn"}},
		{"HTTPMissingTLSFile", "type = \"http\"\ndsn = \"https://api.example.com/\"\n[backends.bad.http]\ntls_ca_file = \"/nonexistent/ca.pem\"",
			[]string{"http.tls_ca_file", "/nonexistent/ca.pem"}},
		{"HTTPMissingClientCert", "type = \"http\"\ndsn = \"https://api.example.com/\"\n[backends.bad.http]\ntls_cert_file = \"/nonexistent/c.pem\"\ntls_key_file = \"/nonexistent/k.pem\"",
			[]string{"http.tls_cert_file", "/nonexistent/c.pem"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runCheck(t, "-check", "-config", backendConfig(t, "[backends.bad]\n"+tc.backend+"\n"))
			if err == nil {
				t.Fatalf("-check passed a backend that cannot be built:\n%s", out)
			}
			all := out + err.Error()
			for _, want := range append(tc.want, "backends.bad") {
				if !strings.Contains(all, want) {
					t.Errorf("-check does not say %q:\n%s", want, all)
				}
			}
			if strings.Contains(out, "config ok") {
				t.Errorf("-check says config ok:\n%s", out)
			}
		})
	}
	t.Run("Good", func(t *testing.T) {
		out, err := runCheck(t, "-check", "-config", backendConfig(t, "[backends.api]\ntype = \"http\"\ndsn = \"http://127.0.0.1:1/\"\n"))
		if err != nil || !strings.Contains(out, "config ok") || !strings.Contains(out, "backends.api (http)") {
			t.Fatalf("-check of a good config: %v\n%s", err, out)
		}
	})
	t.Run("ConnectNeedsCheck", func(t *testing.T) {
		if _, err := runCheck(t, "-connect", "-config", backendConfig(t, "")); err == nil || !strings.Contains(err.Error(), "-check") {
			t.Fatalf("-connect without -check: %v", err)
		}
	})
}

func TestMain_CheckConnect(t *testing.T) {
	my := testDSN(t, "TETHER_TEST_MYSQL_DSN")
	pg := testDSN(t, "TETHER_TEST_POSTGRES_DSN")
	good := "[backends.my]\ntype = \"mysql\"\ndsn = '" + my + "'\n[backends.pg]\ntype = \"postgres\"\ndsn = '" + pg + "'\n"
	t.Run("Good", func(t *testing.T) {
		out, err := runCheck(t, "-check", "-connect", "-config", backendConfig(t, good))
		if err != nil {
			t.Fatalf("-check -connect of a good config: %v\n%s", err, out)
		}
		for _, want := range []string{"backends.my (mysql): connected", "backends.pg (postgres): connected", "config ok"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		bad := "[backends.badmy]\ntype = \"mysql\"\ndsn = '" + wrongPassword(t, "mysql", my) + "'\n" +
			"[backends.badpg]\ntype = \"postgres\"\ndsn = '" + wrongPassword(t, "postgres", pg) + "'\n"
		cfg := backendConfig(t, good+bad)
		if out, err := runCheck(t, "-check", "-config", cfg); err != nil {
			t.Fatalf("-check without -connect connects nothing, so it passes: %v\n%s", err, out)
		}
		out, err := runCheck(t, "-check", "-connect", "-config", cfg)
		if err == nil {
			t.Fatalf("-check -connect passed with a wrong password:\n%s", out)
		}
		lines := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			for _, b := range []string{"badmy", "badpg", "my", "pg"} {
				if strings.Contains(l, "backends."+b+" ") {
					lines[b] = l
				}
			}
		}
		for b, want := range map[string]string{"badmy": "Access denied", "badpg": "password authentication failed"} {
			if l := lines[b]; !strings.HasPrefix(l, "FAIL") || !strings.Contains(l, want) {
				t.Errorf("backends.%s: want a FAIL with the server's %q, got %q\n%s", b, want, l, out)
			}
			if !strings.Contains(err.Error(), b) {
				t.Errorf("the error does not name %s: %v", b, err)
			}
		}
		for _, b := range []string{"my", "pg"} {
			if !strings.HasPrefix(lines[b], "ok") {
				t.Errorf("backends.%s is good: %q", b, lines[b])
			}
		}
	})
}

// TestMain_StartFailureLogged: a start that fails (a backend refuses the
// login) says why in log.file, not only on standard error.
func TestMain_StartFailureLogged(t *testing.T) {
	pg := testDSN(t, "TETHER_TEST_POSTGRES_DSN")
	cfg := backendConfig(t, "[backends.badpg]\ntype = \"postgres\"\ndsn = '"+wrongPassword(t, "postgres", pg)+"'\n")
	out, err := runCheck(t, "-config", cfg)
	if err == nil {
		t.Fatalf("tetherd started with a wrong password:\n%s", out)
	}
	b, rerr := os.ReadFile(filepath.Join(filepath.Dir(cfg), "tetherd.log"))
	if rerr != nil {
		t.Fatal(rerr)
	}
	log := string(b)
	if !strings.Contains(log, "start failed") || !strings.Contains(log, "password authentication failed") || !strings.Contains(log, "badpg") {
		t.Fatalf("the log file does not say why the start failed:\n%s", log)
	}
	t.Run("InvalidConfig", func(t *testing.T) {
		cfg := backendConfig(t, "")
		os.WriteFile(cfg, []byte(strings.Replace(string(mustRead(t, cfg)), "[server]\n", "[server]\nmax_frame_bytes = 3\n", 1)), 0o644)
		if _, err := runCheck(t, "-config", cfg); err == nil {
			t.Fatal("an invalid config started")
		}
		if b, _ := os.ReadFile(filepath.Join(filepath.Dir(cfg), "tetherd.log")); !strings.Contains(string(b), "server.max_frame_bytes = 3") {
			t.Fatalf("the log file does not say why: %q", b)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
