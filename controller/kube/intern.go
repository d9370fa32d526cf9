package kube

import "unique"

// maxInternedLen: longer strings are kept as decoded, since a value that
// long is rarely repeated.
const maxInternedLen = 256

// intern returns the shared copy of s, for the CRR cache (TrimCRR): every
// CRR decoded from the watch has its own copy of each string, though a
// burst's thousands of CRRs repeat the same namespace, labels and container
// names. The standard library's unique package holds each value weakly: a
// value no cached CRR uses any more is dropped by the garbage collector.
// (The pod cache holds its pods encoded, which shares nothing: CachePod.)
func intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	return unique.Make(s).Value()
}
