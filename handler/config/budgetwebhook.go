package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// BudgetWebhook is where each budget threshold crossing (50, 80 and 100 %
// of a key's or a team's tokens or spend in its window) is POSTed as JSON,
// beside its log line: `budget_webhook <url> { timeout 5s  queue 256 }`.
type BudgetWebhook struct {
	// URL receives the POSTs: http or https. Required.
	URL string `json:"url"`

	// Timeout bounds one POST, connection and answer. Default 5s.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Queue is how many crossings wait to be sent at most; one more is
	// dropped, and logged. Default 256, at most MaxWebhookQueue.
	Queue int `json:"queue,omitempty"`
}

// The webhook's defaults and bound.
const (
	DefaultWebhookTimeout = 5 * time.Second
	DefaultWebhookQueue   = 256
	MaxWebhookQueue       = 10_000
)

// Limits are the webhook's timeout and queue, defaults applied.
func (w *BudgetWebhook) Limits() (time.Duration, int) {
	timeout, queue := time.Duration(w.Timeout), w.Queue
	if timeout == 0 {
		timeout = DefaultWebhookTimeout
	}
	if queue == 0 {
		queue = DefaultWebhookQueue
	}
	return timeout, queue
}

// validate checks the webhook, when there is one.
func (w *BudgetWebhook) validate() error {
	if w == nil {
		return nil
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("budget_webhook %q: want an http or https URL", w.URL)
	}
	if w.Timeout < 0 {
		return fmt.Errorf("budget_webhook timeout may not be negative")
	}
	if w.Queue < 0 || w.Queue > MaxWebhookQueue {
		return fmt.Errorf("budget_webhook queue %d: want 1 to %d", w.Queue, MaxWebhookQueue)
	}
	return nil
}
