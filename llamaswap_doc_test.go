package caddyllmgateway

import (
	"os"
	"strings"
	"testing"
)

// A llama-swap user on Windows learns that `cmd` engines are refused there,
// and what to do instead, before the first heading of the page that
// translates their config, not after translating every model.
func TestLlamaSwapPageSaysWhatWindowsUsersDoOnItsFirstScreen(t *testing.T) {
	b, err := os.ReadFile("docs/llama-swap.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "\n")
	first, _, _ := strings.Cut(rest, "\n#")
	if n := strings.Count(first, "\n"); n > 24 {
		t.Errorf("the page's opening is %d lines: more than a screen", n)
	}
	for _, s := range []string{"Windows", "`cmd`", "refused", "WSL2", "`to`"} {
		if !strings.Contains(first, s) {
			t.Errorf("the page's opening does not say %q", s)
		}
	}
}
