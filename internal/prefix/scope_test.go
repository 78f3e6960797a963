package prefix

import (
	"slices"
	"testing"
)

// TestAnotherScopesPromptNeverMatchesThisScopesBlocks: two keys sending the
// same conversation share no block; within one scope a conversation's next
// turn still continues its blocks.
func TestAnotherScopesPromptNeverMatchesThisScopesBlocks(t *testing.T) {
	x := New(2, 0)
	x.Add(0, Scope(Blocks(nil, 64, prompt(3)), "alice"))
	for _, scope := range []string{"bob", "", "alic", "alicee"} {
		if m := x.Lookup(Scope(Blocks(nil, 64, prompt(4)), scope)); m.Blocks != 0 {
			t.Fatalf("scope %q matched %d of alice's blocks", scope, m.Blocks)
		}
	}
	if m := x.Lookup(Scope(Blocks(nil, 64, prompt(4)), "alice")); !m.Has(0) || m.Blocks < 2 {
		t.Fatalf("alice's next turn matched %+v of her own blocks", m)
	}
	plain := Blocks(nil, 64, prompt(3))
	scoped := Scope(slices.Clone(plain), "")
	for i := range plain {
		if plain[i] == scoped[i] {
			t.Fatalf("block %d of the anonymous scope is the unscoped hash", i)
		}
	}
}
