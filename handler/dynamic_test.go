package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// healthyTransport answers every request 200: members found at run time
// pass their check without a socket.
type healthyTransport struct{}

func (healthyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
}

// memberMaker makes members over healthyTransport.
type memberMaker struct{}

func (memberMaker) MakeMember(ec engines.Config) (*engines.Engine, error) {
	return engines.New(ec, healthyTransport{}, zap.NewNop())
}

func (memberMaker) ReleaseMember(e *engines.Engine) { e.Destruct() }

// dnsGateway is a gateway with one pool fed by a source (the test is the
// resolver: it hands SetMembers each answer), logging to an observer.
func dnsGateway(t *testing.T) (*Gateway, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := config.Config{
		Engines: []engines.Config{{Name: "node", To: "http://127.0.0.1:1", Models: []string{"m"}}},
		Pools:   []config.PoolConfig{{Name: "fleet", Dynamic: json.RawMessage(`{"source":"srv","name":"fleet.svc"}`), Template: "node"}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, nil, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	g.SetMemberMaker(memberMaker{})
	t.Cleanup(g.CloseMembers)
	return g, logs
}

// dnsAnswer is a DNS answer of n addresses from 10.0.<first>.x on.
func dnsAnswer(first, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("10.0.%d.%d:8000", first+i/250, i%250))
	}
	return out
}

// members are the pool's members now, by address.
func members(g *Gateway) map[string]bool {
	out := map[string]bool{}
	for _, m := range g.pools["fleet"].all() {
		out[strings.TrimPrefix(m.id, "node@")] = true
	}
	return out
}

// A DNS answer of more than 64 records keeps the pool's members: the choice
// over the cap is the current members first, then the others by rendezvous
// score (every front door with the same answer takes the same), and the
// warning is logged once per answer. Each lookup took a random 64, and of
// 64 members 22, then 13 were members 2 s later; the warning came about 5
// times a second.
func TestADNSAnswerOverTheCapKeepsThePoolsMembers(t *testing.T) {
	ctx := context.Background()
	g, logs := dnsGateway(t)
	big := dnsAnswer(0, 200)
	g.SetMembers(ctx, "fleet", big)
	first := members(g)
	if len(first) != config.MaxDynamicMembers {
		t.Fatalf("%d members of 200 records", len(first))
	}
	// another front door with the same answer takes the same 64
	other, _ := dnsGateway(t)
	other.SetMembers(ctx, "fleet", big)
	if fmt.Sprint(members(other)) != fmt.Sprint(first) {
		t.Fatal("two front doors with one answer took different members")
	}
	// the same answer again, in another order, and a larger one holding
	// them: the same members, one warning per answer
	for range 5 {
		reversed := append([]string(nil), big...)
		for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
			reversed[i], reversed[j] = reversed[j], reversed[i]
		}
		g.SetMembers(ctx, "fleet", reversed)
	}
	g.SetMembers(ctx, "fleet", append(dnsAnswer(1, 300), big...))
	if got := members(g); fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("the members moved: %d of %d stayed", overlap(got, first), len(first))
	}
	if n := logs.FilterMessageSnippet("more members than a pool takes").Len(); n != 2 {
		t.Fatalf("%d warnings for two answers, 7 lookups", n)
	}
	// a member that leaves the answer is replaced; the others stay
	gone := ""
	for a := range first {
		gone = a
		break
	}
	var without []string
	for _, a := range big {
		if a != gone {
			without = append(without, a)
		}
	}
	g.SetMembers(ctx, "fleet", without)
	now := members(g)
	if now[gone] || len(now) != config.MaxDynamicMembers || overlap(now, first) != config.MaxDynamicMembers-1 {
		t.Fatalf("after one member left: %d members, %d of the 63 others stayed, the one gone still in: %v", len(now), overlap(now, first), now[gone])
	}
	// an answer within the cap takes it whole, and the next one over it warns again
	g.SetMembers(ctx, "fleet", dnsAnswer(0, 10))
	g.SetMembers(ctx, "fleet", big)
	if n := logs.FilterMessageSnippet("more members than a pool takes").Len(); n != 4 {
		t.Fatalf("%d warnings for four answers over the cap", n)
	}
}

func overlap(a, b map[string]bool) int {
	n := 0
	for k := range a {
		if b[k] {
			n++
		}
	}
	return n
}
