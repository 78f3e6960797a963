package rendezvous

import (
	"fmt"
	"testing"
)

// Hash is FNV-1a (64 bits): the same on every gateway, build and
// platform, so that two front doors send a session to the same member.
func TestHashIsFNV1a(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]uint64{
		"":       0xcbf29ce484222325,
		"a":      0xaf63dc4c8601ec8c,
		"foobar": 0x85944171f73967e8,
	} {
		if got := Hash(s); got != want {
			t.Errorf("Hash(%q) = %#x, want %#x", s, got, want)
		}
	}
}

// Score is fixed by its inputs: a change of the mixer would move every
// session of every pool at the next upgrade.
func TestScoreIsStable(t *testing.T) {
	t.Parallel()
	if Score(0, 0) != 0 {
		t.Fatal("the finalizer maps 0 to 0")
	}
	if got := Score(Hash("session-1"), Hash("a")); got != Score(Hash("a"), Hash("session-1")) {
		t.Fatal("Score is not symmetric in its inputs")
	}
	if got, want := Score(1, 0), uint64(0x5692161d100b05e5); got != want {
		t.Errorf("Score(1, 0) = %#x, want %#x (splitmix64's finalizer)", got, want)
	}
}

func winner(key string, members []string) string {
	best, top := "", uint64(0)
	for _, m := range members {
		if s := Score(Hash(key), Hash(m)); best == "" || s > top {
			best, top = m, s
		}
	}
	return best
}

// Sessions spread over the members about evenly, and removing a member
// moves only the sessions it held: the others keep theirs.
func TestSessionsSpreadAndOnlyALostMembersMove(t *testing.T) {
	t.Parallel()
	members := []string{"gpu-a", "gpu-b", "gpu-c", "gpu-d"}
	const n = 4000
	count := map[string]int{}
	before := map[string]string{}
	for i := range n {
		k := fmt.Sprintf("session-%d", i)
		before[k] = winner(k, members)
		count[before[k]]++
	}
	for _, m := range members {
		if c := count[m]; c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("%s holds %d of %d sessions", m, c, n)
		}
	}
	left := []string{"gpu-a", "gpu-c", "gpu-d"}
	for k, was := range before {
		now := winner(k, left)
		if was != "gpu-b" && now != was {
			t.Fatalf("%s moved from %s to %s though %s is still there", k, was, now, was)
		}
	}
}
