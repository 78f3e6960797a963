package jsonmember

// Resume lets an object be scanned from where it starts to differ from one
// scanned before. A stream's chunks repeat their first members byte for
// byte ("id", "object", "created", "model": a hundred bytes of an OpenAI
// chunk) and differ from the first member whose value is an object or an
// array ("choices", Anthropic's "delta"): a chunk that repeats the last
// one's bytes up to there is scanned from there, with what the last scan
// had found before it (the scan is the gateway's own cost per
// event).
type Resume struct {
	// At is the offset of that member's key (its opening quote) in the
	// object noted; 0 when it has none.
	At        int
	prevComma int
	mode      Mode
	fields    Fields // what the scan had found before At
}

func (r *Resume) take(f *Fields, at, prevComma int) {
	r.At, r.prevComma, r.fields = at, prevComma, *f
}

// ScanNoting is Scan, noting in r where a later object may be taken up.
// An object that is not valid after that point still notes it: the bytes
// before it were.
func (f *Fields) ScanNoting(b []byte, mode Mode, r *Resume) error {
	r.At, r.mode = 0, mode
	return f.scan(b, mode, r)
}

// Resumes reports whether b can be scanned with ScanFrom: its bytes up to
// and including r.At are prefix, those of the object r was noted from,
// and mode is that scan's.
func (r *Resume) Resumes(b, prefix []byte, mode Mode) bool {
	return r.At > 0 && r.mode == mode && len(prefix) == r.At+1 && len(b) > r.At && string(b[:r.At+1]) == string(prefix)
}

// ScanFrom is Scan of b, for which r.Resumes: it scans from r.At on only,
// and finds what Scan finds.
func (f *Fields) ScanFrom(b []byte, r *Resume) error {
	*f = r.fields
	return f.scanMembers(b, r.At, r.prevComma, r.mode, nil)
}
