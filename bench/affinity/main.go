// Command affinity measures how a pool chooses: four fake engines
// with a prefix cache (engine.go) behind llm_gateway, run in this process,
// and the same workload under balance round_robin, least_loaded and
// affinity, interleaved in rounds whose order rotates. Two workloads: (a)
// multi-turn conversations without session keys; (b) the same with a hot
// shared system prompt on a share of them, near saturation. It prints, per
// policy: the share of turns on the member that served the turn before,
// time to first token p50/p99, the engines' queue wait p99, and the
// requests refused.
//
//	go run ./bench/affinity                      # the sizes
//	go run ./bench/affinity -convs 40 -turns 5   # a smoke run
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmgateway/caddy-llm-gateway/caddymodule"
)

type options struct {
	engines, slots, cacheBlocks, block int
	perBlock, perToken                 time.Duration
	tokens                             int
	convs, turns, clients, rounds      int
	hotShare                           float64
	think                              time.Duration
	hotClients                         int
	signals                            bool
	engineOpts, balanceOpts            string
}

func main() {
	var o options
	flag.IntVar(&o.engines, "engines", 4, "fake engines in the pool")
	flag.IntVar(&o.slots, "slots", 2, "requests an engine serves at once; the rest queue")
	flag.IntVar(&o.cacheBlocks, "cache-blocks", 2048, "blocks an engine's prefix cache holds")
	flag.IntVar(&o.block, "block", 256, "bytes in a block")
	flag.DurationVar(&o.perBlock, "prompt-per-block", 2*time.Millisecond, "prompt time of a block the engine does not hold")
	flag.DurationVar(&o.perToken, "decode-per-token", 250*time.Microsecond, "decode time of a token")
	flag.IntVar(&o.tokens, "tokens", 128, "tokens in an answer (chat answers are longer than the questions: ShareGPT's average a few hundred)")
	flag.IntVar(&o.convs, "convs", 200, "conversations per workload and policy")
	flag.IntVar(&o.turns, "turns", 10, "turns per conversation")
	flag.IntVar(&o.clients, "clients", 8, "conversations in progress at once, workload (a)")
	flag.IntVar(&o.hotClients, "hot-clients", 14, "conversations in progress at once, workload (b): near saturation")
	flag.DurationVar(&o.think, "think", 40*time.Millisecond, "mean pause between a conversation's turns (uniform 0–2×): clients in lockstep would make round-robin land on the same member turn after turn")
	flag.Float64Var(&o.hotShare, "hot-share", 0.3, "share of conversations with the hot system prompt, workload (b)")
	flag.IntVar(&o.rounds, "rounds", 2, "rounds; each runs every policy on convs/rounds conversations")
	flag.BoolVar(&o.signals, "signals", true, "engines with signals metrics (read every 250ms)")
	flag.StringVar(&o.engineOpts, "engine-opts", "", "more engine options, ';'-separated (e.g. 'max_concurrent 2;queue 64')")
	flag.StringVar(&o.balanceOpts, "balance-opts", "", "balance block options, ';'-separated (e.g. 'balance_abs_threshold 2')")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "affinity:", err)
		os.Exit(1)
	}
}

var policies = []string{"round_robin", "least_loaded", "affinity"}

func run(o options) error {
	var es []*engine
	for i := range o.engines {
		e, err := startEngine(fmt.Sprint("e", i), o.slots, o.cacheBlocks, o.block, o.perBlock, o.perToken, o.tokens)
		if err != nil {
			return err
		}
		defer e.srv.Close()
		es = append(es, e)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gw := ln.Addr().String()
	ln.Close()
	defer caddy.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

	for _, w := range []struct {
		name    string
		hot     float64
		clients int
	}{{"(a) conversations", 0, o.clients}, {"(b) hot system prompt", o.hotShare, o.hotClients}} {
		stats := map[string]*result{}
		for _, p := range policies {
			stats[p] = &result{}
		}
		per := max(1, o.convs/o.rounds)
		for round := range o.rounds {
			for i := range policies {
				p := policies[(i+round)%len(policies)] // the order rotates round by round
				if err := load(gw, es, p, o); err != nil {
					return err
				}
				// a reload closes the old server's connections: none may be reused
				client.CloseIdleConnections()
				for _, e := range es {
					e.reset()
				}
				r := converse(client, gw, per, o.turns, w.clients, w.hot, o.think, round*per)
				for _, e := range es {
					r.blocks += e.blocks.Load()
					r.hits += e.hits.Load()
					r.waits = append(r.waits, e.reset()...)
				}
				stats[p].add(r)
			}
		}
		fmt.Printf("\n%s: %d engines x %d slots, %d conversations x %d turns per policy, %d at once\n",
			w.name, o.engines, o.slots, per*o.rounds, o.turns, w.clients)
		fmt.Printf("%-13s %10s %12s %10s %10s %14s %8s\n", "policy", "same", "reprocessed", "ttft p50", "ttft p99", "queue p99", "refused")
		for _, p := range policies {
			s := stats[p]
			fmt.Printf("%-13s %9.1f%% %11.1f%% %10s %10s %14s %8d\n", p, 100*float64(s.same)/float64(max(1, s.later)),
				100*float64(s.blocks-s.hits)/float64(max(1, s.blocks)),
				percentile(s.ttft, 0.5).Round(time.Millisecond/10), percentile(s.ttft, 0.99).Round(time.Millisecond/10),
				percentile(s.waits, 0.99).Round(time.Millisecond/10), s.refused)
		}
	}
	return nil
}

// load runs the gateway with the pool's balance set to policy.
func load(gw string, es []*engine, policy string, o options) error {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin off\n\tgrace_period 1s\n\tlog {\n\t\tlevel ERROR\n\t}\n}\nhttp://%s {\n\tllm_gateway {\n\t\thistory off\n", gw)
	for _, e := range es {
		fmt.Fprintf(&b, "\t\tengine %s {\n\t\t\tto %s\n\t\t\tmodels m-%s\n\t\t\tretries 0\n", e.name, e.url, e.name)
		if o.signals {
			b.WriteString("\t\t\tsignals metrics\n\t\t\tsignals_interval 250ms\n")
		}
		b.WriteString(lines(o.engineOpts, "\t\t\t") + "\t\t}\n")
	}
	b.WriteString("\t\tpool auto {\n")
	for _, e := range es {
		fmt.Fprintf(&b, "\t\t\tmember %s\n", e.name)
	}
	fmt.Fprintf(&b, "\t\t\tbalance %s {\n%s\t\t\t}\n\t\t}\n\t}\n}\n", policy, lines(o.balanceOpts, "\t\t\t\t"))
	cfg, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(b.String()), nil)
	if err != nil {
		return err
	}
	return caddy.Load(cfg, true)
}

type result struct {
	ttft        []time.Duration
	waits       []time.Duration
	same, later int
	refused     int
	// prompt blocks the engines were sent, and of them those their cache held
	blocks, hits int64
}

func (r *result) add(o *result) {
	r.ttft = append(r.ttft, o.ttft...)
	r.waits = append(r.waits, o.waits...)
	r.same += o.same
	r.later += o.later
	r.refused += o.refused
	r.blocks += o.blocks
	r.hits += o.hits
}

// hotPrompt is the system prompt workload (b) shares: 4 KB.
var hotPrompt = strings.Repeat("You are the support assistant of a large company; answer with care. ", 60)

// converse runs convs conversations of turns turns, clients at once; a share
// hot of them begins with the hot system prompt; a conversation pauses
// about think between turns. first numbers them.
func converse(client *http.Client, gw string, convs, turns, clients int, hot float64, think time.Duration, first int) *result {
	var mu sync.Mutex
	res := &result{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				system := fmt.Sprintf("You help with conversation %d.", c)
				if hot > 0 && float64(c%100) < hot*100 {
					system = hotPrompt
				}
				msgs := []string{fmt.Sprintf(`{"role":"system","content":%q}`, system)}
				prev := ""
				for t := range turns {
					if t > 0 && think > 0 {
						time.Sleep(rand.N(2 * think))
					}
					msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"conversation %d, question %d: %s"}`, c, t, strings.Repeat("what about this? ", 12)))
					body := `{"model":"auto","stream":true,"messages":[` + strings.Join(msgs, ",") + `]}`
					ttft, served, answer, ok := ask(client, gw, body)
					mu.Lock()
					if !ok {
						res.refused++
					} else {
						res.ttft = append(res.ttft, ttft)
						if t > 0 {
							res.later++
							if served == prev {
								res.same++
							}
						}
					}
					mu.Unlock()
					prev = served
					msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"%s"}`, answer))
				}
			}
		}()
	}
	for c := range convs {
		work <- first + c
	}
	close(work)
	wg.Wait()
	return res
}

// ask sends one streamed turn and returns the time to its first content
// event, the engine that served it and the answer's text.
func ask(client *http.Client, gw, body string) (time.Duration, string, string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+gw+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	began := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refused:", err)
		return 0, "", "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(os.Stderr, "refused: %d %s\n", resp.StatusCode, b)
		return 0, "", "", false
	}
	var ttft time.Duration
	var answer strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"content":"tok`) {
			continue
		}
		if ttft == 0 {
			ttft = time.Since(began)
		}
		answer.WriteString("tok ")
	}
	if ttft == 0 {
		fmt.Fprintln(os.Stderr, "refused: no content", sc.Err())
	}
	return ttft, resp.Header.Get("X-LLM-Engine"), answer.String(), ttft > 0
}

// lines turns "a 1;b 2" into indented lines.
func lines(opts, indent string) string {
	var b strings.Builder
	for _, l := range strings.Split(opts, ";") {
		if l = strings.TrimSpace(l); l != "" {
			b.WriteString(indent + l + "\n")
		}
	}
	return b.String()
}
