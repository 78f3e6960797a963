package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/redistest"
)

// Keys that carry rules, through Caddy. Windows are days, so that a test
// never straddles one (the fake-time checks of the exact Retry-After are
// the handler's tests).

const (
	teamKey = "team-a-gateway-key-0123"
	opsKey  = "ops-gateway-key-0123456"
)

func keysSite(keepalive string) string {
	return `
		keepalive ` + keepalive + `
		key team-a ` + teamKey + ` {
			models demo
			rate 3/d
		}
		key ops ` + opsKey + `
		engine demo {
			` + engineCmd("--model demo --chunk-delay 1ms") + `
			models demo
		}
		engine other {
			to http://127.0.0.1:9
			models other
		}`
}

func TestKeyRulesThroughCaddy(t *testing.T) {
	startGateway(t, keysSite("3s"))
	// the counters outlive a test in this binary's data directory (as they
	// outlive a config): this test starts from none (go test -count=2)
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/team-a/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	team := sdk(teamKey)
	ctx := context.Background()
	before := scrape(t) // the metrics outlive a test too

	_, err := team.Chat.Completions.New(ctx, chatParams("other", "hi"))
	if e := apiError(t, err, 403); e.Code != "model_not_allowed" || !strings.Contains(e.Message, "it may use: demo") {
		t.Fatalf("%+v", e)
	}
	page, err := team.Models.List(ctx)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "demo" {
		t.Fatalf("models %+v %v", page, err)
	}
	// the listing was one request of three: every route counts
	for i := range 2 {
		if _, err := team.Chat.Completions.New(ctx, chatParams("demo", "hi")); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	_, err = team.Chat.Completions.New(ctx, chatParams("demo", "hi"))
	e := apiError(t, err, 429)
	if e.Code != "rate_limit_exceeded" || e.Response.Header.Get("Retry-After") == "" ||
		e.Response.Header.Get("X-Ratelimit-Remaining-Requests") != "0" || e.Response.Header.Get("X-Ratelimit-Limit-Requests") != "3" {
		t.Fatalf("%+v %v", e, e.Response.Header)
	}
	// the passthrough is a route like the others
	req := mustReq(http.MethodGet, gwURL+"/upstream/demo/health")
	req.Header.Set("Authorization", "Bearer "+teamKey)
	if resp, body := do(t, req); resp.StatusCode != 429 {
		t.Fatalf("the passthrough over the rate: %d %s", resp.StatusCode, body)
	}
	// the other key has no limits
	if _, err := sdk(opsKey).Chat.Completions.New(ctx, chatParams("other-than-demo-is-fine", "hi")); err == nil {
		t.Fatal("an unknown model answered")
	}

	// the counters survive a reload
	startGateway(t, keysSite("4s"))
	_, err = team.Chat.Completions.New(ctx, chatParams("demo", "hi"))
	apiError(t, err, 429)

	// the admin API shows the usage by the key's name, never its token
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys"))
	if !strings.Contains(body, `"key": "team-a"`) || !strings.Contains(body, `"used": 3`) || strings.Contains(body, teamKey) {
		t.Fatalf("%s", body)
	}
	after := scrape(t)
	refused := func(reason string) float64 {
		labels := `key="team-a",reason="` + reason + `"`
		return sample(t, after, "llm_gateway_key_refusals_total", labels) - sample(t, before, "llm_gateway_key_refusals_total", labels)
	}
	if refused("rate") != 3 || refused("model") != 1 || strings.Contains(after, teamKey) {
		t.Fatalf("refusals: rate %v, model %v; metrics:\n%s", refused("rate"), refused("model"), grepLines(after, "key_"))
	}
	// a reset gives the key its window back
	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/team-a/reset"))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if _, err := team.Chat.Completions.New(ctx, chatParams("demo", "hi")); err != nil {
		t.Fatalf("after a reset: %v", err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// gatewayProcess is a Caddy binary running a Caddyfile, with its own data
// directory.
type gatewayProcess struct {
	t     *testing.T
	cmd   *exec.Cmd
	addr  string
	admin string
	out   string // its output: Caddy's log, at debug level
	done  chan struct{}
}

// runGateway starts the Caddy binary on a Caddyfile whose site is addr and
// waits until it answers there.
func runGateway(t *testing.T, dataDir, addr, admin, site string) *gatewayProcess {
	t.Helper()
	file := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf("{\n\tadmin %s\n\tskip_install_trust\n\tlog {\n\t\tlevel DEBUG\n\t}\n}\nhttp://%s {\n\tllm_gateway {\n%s\n\t}\n}\n", admin, addr, site)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBinary(t), "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+dataDir, "XDG_CONFIG_HOME="+dataDir)
	out, err := os.Create(filepath.Join(t.TempDir(), "caddy.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{t: t, cmd: cmd, addr: addr, admin: admin, out: out.Name(), done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	eventually(t, "caddy answers on "+addr, func() bool {
		select {
		case <-p.done:
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("caddy exited:\n%s", b)
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

// stop ends the process as an operator's SIGTERM does: Caddy stops its
// config (the counters are saved) and exits.
func (p *gatewayProcess) stop() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// chat asks a gateway process for a completion with key and returns the
// status.
func (p *gatewayProcess) chat(key string) int {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, _ := do(p.t, req)
	return resp.StatusCode
}

func demoEngineSite(keys string) string {
	return keys + `
		engine demo {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model demo --chunk-delay 1ms
			to http://127.0.0.1:{engine.port}
			models demo
		}`
}

func TestKeyCountersSurviveARestart(t *testing.T) {
	data := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	site := demoEngineSite(`
		key team-a ` + teamKey + ` {
			rate 3/d
		}`)
	p := runGateway(t, data, addr, admin, site)
	for range 2 {
		if st := p.chat(teamKey); st != 200 {
			t.Fatalf("%d", st)
		}
	}
	p.stop()
	p = runGateway(t, data, addr, admin, site)
	if st := p.chat(teamKey); st != 200 {
		t.Fatalf("the third request: %d", st)
	}
	if st := p.chat(teamKey); st != 429 {
		t.Fatalf("the fourth request after a restart: %d, want 429", st)
	}
}

func TestTwoGatewaysSharingRedisEnforceOneBudget(t *testing.T) {
	redis := redistest.Start(t)
	site := demoEngineSite(`
		store redis ` + redis.Addr() + `
		key team-a ` + teamKey + ` {
			rate 5/d
		}
		key bulk ` + opsKey + ` {
			rate 100000/d
		}`)
	g1 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	g2 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	ok := 0
	for i := range 10 {
		g := g1
		if i%2 == 1 {
			g = g2
		}
		switch st := g.chat(teamKey); st {
		case 200:
			ok++
		case 429:
		default:
			t.Fatalf("status %d", st)
		}
	}
	if ok != 5 {
		t.Fatalf("two gateways allowed %d requests of a key limited to 5 a day", ok)
	}

	// Redis goes away: requests are still served, on local counters, and
	// the metric says the store is degraded
	redis.Stop()
	for range 3 {
		if st := g1.chat(opsKey); st != 200 {
			t.Fatalf("with Redis down: %d", st)
		}
	}
	eventually(t, "the degraded metric", func() bool {
		_, body := do(t, mustReq(http.MethodGet, "http://"+g1.admin+"/metrics"))
		return strings.Contains(body, `llm_gateway_quota_store_degraded{store="redis"} 1`)
	})
}
