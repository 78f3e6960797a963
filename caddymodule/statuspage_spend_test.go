package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// The page's spend charts, in a real browser: each key's and each model's
// spend today, the same to the cent as GET /llm_gateway/spend's answer for
// the same days (its totals, and today's bar to the nano-dollar).
//
//	dear   usageChat's 7 in, 3 out at $10,000 / $100,000 per M = $0.37
//	cheap  the same at $1,000 / $10,000 per M                   = $0.037
//	alice: dear, dear, cheap = $0.777; bob: dear = $0.37
//
// and records of earlier days, put in the history as the gateway would
// have kept them then, so that the bars of several days are checked too.
func TestStatusPageChartsSpendPerKeyAndModelPerDay(t *testing.T) {
	ctx := browser(t)
	// names of this run's own: the history outlives a test (-count=2)
	// six base-36 digits whatever the clock says: a key (sk-sp-bob-…) is
	// 16 characters at least, and five digits made it 15, refused
	suffix := strconv.FormatInt(1e9+time.Now().UnixNano()%1e9, 36)
	dear, cheap := "sp-dear-"+suffix, "sp-cheap-"+suffix
	alice, bob := "sp-alice-"+suffix, "sp-bob-"+suffix
	up := newRecorder(t, usageChat)
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		key %[3]s sk-%[3]s
		key %[4]s sk-%[4]s
		ui /llm
		price %[1]s input 10000 output 100000
		price %[2]s input 1000 output 10000
		engine %[1]s {
			to %[5]s
			models %[1]s
		}
		engine %[2]s {
			to %[5]s
			models %[2]s
		}`, dear, cheap, alice, bob, up.URL))
	for _, q := range []struct{ key, model string }{{alice, dear}, {alice, dear}, {alice, cheap}, {bob, dear}} {
		if resp, body := post(t, "/v1/chat/completions", `{"model":"`+q.model+`","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer sk-"+q.key); resp.StatusCode != 200 {
			t.Fatalf("%s as %s: %d %s", q.model, q.key, resp.StatusCode, body)
		}
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for _, r := range []struct {
		daysAgo    int
		key, model string
		cost       price.Amount
	}{{1, alice, dear, 500_000_000}, {3, alice, dear, 1_200_000_000}, {3, alice, cheap, 40_000_000}, {2, bob, cheap, 250_000_000}, {5, bob, dear, 90_000_000}} {
		newestHistory().Add(history.Record{Time: today.AddDate(0, 0, -r.daysAgo).Add(13 * time.Hour).UnixMilli(), Key: r.key, Model: r.model, Engine: r.model,
			Path: "/v1/chat/completions", Status: 200, TokensIn: 7, TokensOut: 3, Cost: r.cost})
	}
	syncHistory(t)

	// the admin call over the page's seven UTC days
	since := strconv.FormatInt(today.AddDate(0, 0, -6).UnixMilli(), 10)
	admin := func(by string) map[string]history.SpendGroup {
		resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/spend?since="+since+"&by="+by))
		var sp history.Spend
		if err := json.Unmarshal([]byte(body), &sp); resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET /llm_gateway/spend?by=%s: %d %v %s", by, resp.StatusCode, err, body)
		}
		out := map[string]history.SpendGroup{}
		for _, g := range sp.Groups {
			out[g.Key+g.Model+"|"+g.Day] = g
		}
		return out
	}
	byKey, byKeyDay := admin("key"), admin("key,day")
	byModel, byModelDay := admin("model"), admin("model,day")
	if byKey[alice+"|"].Cost.String() != "2.517" || byKey[bob+"|"].Cost.String() != "0.71" || byModel[cheap+"|"].Cost.String() != "0.327" {
		t.Fatalf("the admin call: %+v %+v", byKey, byModel)
	}

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	untilTrue(t, ctx, "the spend section", `!document.querySelector('#spend-section').hidden`)
	row := func(chart, name string) string {
		return `document.querySelector('#spend [data-chart="` + chart + `"] tr[data-name="` + name + `"]')`
	}
	// each day's bar, oldest first, as the admin call by day says
	days := func(groups map[string]history.SpendGroup, name string) string {
		var out []string
		for i := 6; i >= 0; i-- {
			d := today.AddDate(0, 0, -i).Format(time.DateOnly)
			if g, ok := groups[name+"|"+d]; ok {
				out = append(out, d+"="+strconv.FormatFloat(g.Cost.Float(), 'f', -1, 64)) // as JavaScript writes the number
			}
		}
		return strings.Join(out, " ")
	}
	check := func(chart, name string, total history.SpendGroup, perDay string) {
		t.Helper()
		untilTrue(t, ctx, name+"'s row", row(chart, name))
		got := eval[string](t, ctx, row(chart, name)+`.querySelector('.cost').textContent + ' ' + `+row(chart, name)+`.cells[2].textContent`)
		if want := fmt.Sprintf("$%.2f %d", total.Cost.Float(), total.Requests); got != want {
			t.Errorf("%s: the page shows %q, the admin call says %q", name, got, want)
		}
		bar := eval[string](t, ctx, `[...`+row(chart, name)+`.querySelectorAll('rect')].map((r) => r.dataset.day + '=' + r.dataset.usd).join(' ')`)
		if want := perDay; bar != want || strings.Count(want, "=") < 2 {
			t.Errorf("%s: the page's bars %q, the admin call by day says %q", name, bar, want)
		}
	}
	check("keys", alice, byKey[alice+"|"], days(byKeyDay, alice))
	check("keys", bob, byKey[bob+"|"], days(byKeyDay, bob))
	check("models", dear, byModel[dear+"|"], days(byModelDay, dear))
	check("models", cheap, byModel[cheap+"|"], days(byModelDay, cheap))
	if got := eval[string](t, ctx, `[...`+row("models", cheap)+`.querySelectorAll('rect title')].pop().textContent`); got != today.Format("Jan 2")+": $0.04" {
		t.Errorf("cheap's bar says %q", got)
	}

	// the last 30 days: the same rows, thirty days
	run(t, ctx, "the last 30 days", chromedp.Click(chromedp.CSS(`button[data-days="30"]`)))
	untilTrue(t, ctx, "thirty days", `document.querySelector('#spend').dataset.days === '30' && `+row("keys", alice))
	// on a phone's screen the charts fit
	run(t, ctx, "a phone's screen", chromedp.EmulateViewport(390, 844))
	until(t, ctx, "the page fitting a phone", `document.documentElement.scrollWidth <= window.innerWidth`)
	run(t, ctx, "back to a wide screen", chromedp.EmulateViewport(1280, 1000))
	run(t, ctx, "the last 7 days", chromedp.Click(chromedp.CSS(`button[data-days="7"]`)))
	untilTrue(t, ctx, "seven days", `document.querySelector('#spend').dataset.days === '7' && `+row("keys", alice))
	screenshot(t, ctx, "LLMGW_SCREENSHOT_SPEND", "#spend-section")
}
