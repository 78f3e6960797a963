package caddymodule

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Caddy binds a new config's sockets beside the old config's with
// SO_REUSEPORT (Linux) and closes the old ones in goroutines it does not
// wait for. The kernel spreads new connections over every socket bound to
// a port, and a connection still queued on the old socket when it closes
// is reset. So a test's first request after a load met, about once in 500
// loads on a busy machine, "EOF" or "connection reset by peer" before any
// answer, and caddytest now and then found its admin endpoint gone and
// skipped the test. initRaw waits for the old sockets to close.

// waitOldListeners waits until at most one socket listens on each port
// (decimal strings), as /proc/net/tcp and tcp6 say; elsewhere it returns at
// once (other systems share one socket between configs).
func waitOldListeners(t *testing.T, ports ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		counts, ok := listeningSockets()
		if !ok {
			return
		}
		busy := 0
		for _, p := range ports {
			if n, _ := strconv.Atoi(p); counts[n] > 1 {
				busy = n
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("port %d still has %d listening sockets after a config load", busy, counts[busy])
			return
		}
		time.Sleep(time.Millisecond) // polling the kernel's table: there is no event to wait on
	}
}

// listeningSockets counts the listening TCP sockets by local port.
func listeningSockets() (map[int]int, bool) {
	counts := map[int]int{}
	found := false
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		found = true
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "0A" { // TCP_LISTEN
				continue
			}
			i := strings.LastIndexByte(fields[1], ':')
			if port, err := strconv.ParseUint(fields[1][i+1:], 16, 16); err == nil {
				counts[int(port)]++
			}
		}
		f.Close()
	}
	return counts, found
}
