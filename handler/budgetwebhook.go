package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The budget webhook (budget_webhook): each threshold crossing that
// tellThresholds logs is also POSTed, once, as JSON to the operator's URL.
// A request never waits for it: the crossing goes into a bounded queue that
// one sender empties, one POST at a time, each bounded by the timeout. A
// crossing that finds the queue full is dropped and logged; a POST that
// fails is logged and not retried, so a receiver that is down costs one
// timeout per crossing, never a storm. The sender starts with the first
// crossing (caddy validate starts none) and stops when the config is let go
// of, dropping what it had not sent.

// thresholdEvent is what the webhook receives. Names, never tokens.
type thresholdEvent struct {
	Event   string          `json:"event"`          // budget_threshold
	Key     string          `json:"key,omitempty"`  // the key's name
	Team    string          `json:"team,omitempty"` // or the team's
	Kind    string          `json:"kind"`           // tokens or spend
	Window  string          `json:"window"`         // s, m, h, d or mo
	Used    json.RawMessage `json:"used"`           // tokens, or dollars for spend
	Limit   json.RawMessage `json:"limit"`
	Percent int             `json:"percent"` // 50, 80 or 100
	Resets  time.Time       `json:"resets"`  // when the window ends
	Time    time.Time       `json:"time"`
}

// budgetWebhook sends the crossings of one config.
type budgetWebhook struct {
	url     string
	timeout time.Duration
	log     *zap.Logger
	queue   chan []byte
	start   sync.Once
	stop    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

func newBudgetWebhook(cfg *config.BudgetWebhook, log *zap.Logger) *budgetWebhook {
	if cfg == nil {
		return nil
	}
	timeout, queue := cfg.Limits()
	return &budgetWebhook{url: cfg.URL, timeout: timeout, log: log, queue: make(chan []byte, queue),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// send queues a crossing of who's (a key's or a team's) budget.
func (w *budgetWebhook) send(who, name string, c quota.Crossing, now time.Time) {
	if w == nil {
		return
	}
	ev := thresholdEvent{Event: "budget_threshold", Kind: string(c.Kind), Window: c.Limit.Window.String(),
		Percent: c.Percent, Resets: c.Reset, Time: now.UTC()}
	if who == "team" {
		ev.Team = name
	} else {
		ev.Key = name
	}
	if c.Kind == quota.Spend {
		ev.Used, _ = price.Amount(c.Used).MarshalJSON()
		ev.Limit, _ = price.Amount(c.Limit.N).MarshalJSON()
	} else {
		ev.Used, _ = json.Marshal(c.Used)
		ev.Limit, _ = json.Marshal(c.Limit.N)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return
	}
	w.start.Do(func() { go w.run() })
	select {
	case w.queue <- body:
	default:
		w.log.Warn("the budget webhook's queue is full: a threshold crossing was dropped (it is in the log)",
			zap.String(who, name), zap.Int("percent", c.Percent), zap.Int("queue", cap(w.queue)))
	}
}

func (w *budgetWebhook) run() {
	defer close(w.done)
	client := &http.Client{Timeout: w.timeout}
	for {
		select {
		case <-w.stop:
			return
		case body := <-w.queue:
			select {
			case <-w.stop: // both were ready: the config is gone
				return
			default:
			}
			w.post(client, body)
		}
	}
}

// post sends one crossing, once.
func (w *budgetWebhook) post(client *http.Client, body []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // a config let go of does not wait out a slow receiver
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		w.log.Warn("the budget webhook failed: a threshold crossing was not delivered (it is in the log)", zap.Error(err))
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		w.log.Warn("the budget webhook answered an error: a threshold crossing was not delivered (it is in the log)", zap.Int("status", resp.StatusCode))
	}
}

// close stops the sender, if it started, and waits for it.
func (w *budgetWebhook) close() {
	if w == nil {
		return
	}
	w.stopped.Do(func() {
		close(w.stop)
		started := true
		w.start.Do(func() { started = false })
		if started {
			<-w.done
		}
	})
}
