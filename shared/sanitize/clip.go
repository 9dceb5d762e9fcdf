package sanitize

// Clip returns s cut to its first n runes, with "…" added when anything was cut.
// It never splits a UTF-8 sequence; a negative n counts as 0.
func Clip(s string, n int) string {
	runes := 0
	for i := range s {
		if runes >= n {
			return s[:i] + "…"
		}
		runes++
	}
	return s
}
