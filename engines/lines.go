package engines

import (
	"bufio"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
)

// keptLines is how many of an engine's last output lines are kept for errors
// and the admin API.
const keptLines = 100

// maxLineBytes cuts very long output lines (a progress bar without newlines)
// so that one line cannot hold unbounded memory.
const maxLineBytes = 4096

// lineBuffer keeps the last lines an engine printed, across restarts, so a
// start that fails can say why. Lines are numbered, so that a reader (the
// status page's live log) follows them at its own pace: it never holds the
// engine's output up, and one that falls behind the ring skips ahead.
type lineBuffer struct {
	secrets []string // masked in every line; set before the first line

	mu      sync.Mutex
	lines   []string // ring of at most keptLines
	marks   []mark   // each line's time and run, beside lines
	run     int      // starts so far: the run the next lines belong to
	next    int
	full    bool
	seq     uint64        // lines ever added: the newest has number seq
	changed chan struct{} // closed and replaced when a line is added
}

func (b *lineBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lines == nil {
		b.lines = make([]string, keptLines)
		b.marks = make([]mark, keptLines)
	}
	b.lines[b.next] = line
	b.marks[b.next] = mark{at: time.Now(), run: b.run} // for display only: the wall clock
	b.next = (b.next + 1) % keptLines
	if b.next == 0 {
		b.full = true
	}
	b.seq++
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// since returns the kept lines numbered after seq (oldest first), the number
// of the newest line, and a channel closed when the next line is added.
func (b *lineBuffer) since(seq uint64) ([]string, uint64, <-chan struct{}) {
	lines, last, wake := b.timedSince(seq)
	if lines == nil {
		return nil, last, wake
	}
	texts := make([]string, len(lines))
	for i, l := range lines {
		texts[i] = l.Text
	}
	return texts, last, wake
}

// last returns up to n of the most recent lines, oldest first.
func (b *lineBuffer) last(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastLocked(n)
}

func (b *lineBuffer) lastLocked(n int) []string {
	idx := b.newest(n)
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, b.lines[i])
	}
	return out
}

// newest is where the up to n most recent lines are in the ring, oldest
// first. Call with mu held.
func (b *lineBuffer) newest(n int) []int {
	count := b.next
	if b.full {
		count = keptLines
	}
	n = min(n, count)
	out := make([]int, 0, n)
	for i := count - n; i < count; i++ {
		idx := i
		if b.full {
			idx = (b.next + i) % keptLines
		}
		out = append(out, idx)
	}
	return out
}

// pump copies r line by line into the buffer and the engine's logger until r
// ends; the caller owns the goroutine it runs in.
func (b *lineBuffer) pump(r io.Reader, log *zap.Logger, stream string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if len(line) > maxLineBytes {
			line = line[:maxLineBytes] + "…"
		}
		line = Mask(line, b.secrets)
		b.add(line)
		log.Info(line, zap.String("stream", stream))
	}
	// a line longer than the scanner's limit ends scanning; drain the rest
	// so the engine never blocks on a full pipe
	_, _ = io.Copy(io.Discard, r)
}

// Line is one output line with its time and run: the engine's start that
// printed it (1 for its first start since the gateway began).
type Line struct {
	Text string    `json:"text"`
	At   time.Time `json:"at"`
	Run  int       `json:"run"`
}

type mark struct {
	at  time.Time
	run int
}

// newRun marks the lines that follow as the next start's.
func (b *lineBuffer) newRun() {
	b.mu.Lock()
	b.run++
	b.mu.Unlock()
}

// timedSince is since with each line's time and run.
func (b *lineBuffer) timedSince(seq uint64) ([]Line, uint64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	if b.seq <= seq {
		return nil, b.seq, b.changed
	}
	idx := b.newest(int(min(b.seq-seq, keptLines)))
	out := make([]Line, 0, len(idx))
	for _, i := range idx {
		out = append(out, Line{Text: b.lines[i], At: b.marks[i].at, Run: b.marks[i].run})
	}
	return out, b.seq, b.changed
}
