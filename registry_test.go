package tether_test

import (
	"testing"

	tether "github.com/tether-php/tether"
	_ "github.com/tether-php/tether/backend/all"
)

func TestRegistry(t *testing.T) {
	want := []string{"bigtable", "cassandra", "http", "mysql", "postgres", "sqlite"}
	got := tether.BackendTypeNames()
	if len(got) != len(want) {
		t.Fatalf("registered types %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("registered types %v, want %v", got, want)
		}
	}
	for name, cs := range map[string]bool{"mysql": true, "postgres": true, "sqlite": false, "http": false} {
		if typ, _ := tether.LookupBackendType(name); typ.ChangeStream != cs {
			t.Errorf("%s: ChangeStream = %v, want %v", name, typ.ChangeStream, cs)
		}
	}
	if typ, _ := tether.LookupBackendType("http"); !typ.HTTP {
		t.Error("http does not take the [backends.NAME.http] settings")
	}
}
