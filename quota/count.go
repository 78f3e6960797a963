package quota

// ParseCount reads a count as limits write theirs: 1024, 4k, 1.5M.
func ParseCount(s string) (int64, error) { return parseCount(s) }
