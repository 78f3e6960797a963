package keystore

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkFind is the door's cost of an issued key: one keyed hash and
// one map lookup, whatever the number of keys (1000 here, the default
// most), for a right token and for a wrong one.
func BenchmarkFind(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Config{Path: filepath.Join(dir, "quota.db"), SecretPath: filepath.Join(dir, "keys.secret"), Max: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var token string
	for i := range 1000 {
		_, t, err := s.Issue(spec(fmt.Sprintf("key-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		token = t
	}
	for _, tc := range []struct{ name, token string }{{"right", token}, {"wrong", "sk-llmgw-" + token[9:40] + "xxxxxxxxxxxx"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if kr, _ := s.Find(tc.token); (kr != nil) != (tc.name == "right") {
					b.Fatal("found the wrong answer")
				}
			}
		})
	}
}
