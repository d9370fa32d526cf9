package kube

import "unique"

// maxInternedLen: longer strings are kept as decoded, since a value that
// long is rarely repeated.
const maxInternedLen = 256

// intern returns the shared copy of s. Every pod decoded from the watch has
// its own copy of each string, so 20,000 pods of one Job template held
// 20,000 copies of the same image, namespace and node names. The standard
// library's unique package holds each value weakly: a value no cached pod
// uses any more is dropped by the garbage collector, so the table is
// bounded by the strings the cache holds anyway.
func intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	return unique.Make(s).Value()
}
