package kube

import "sync"

// maxInterned bounds the strings the pod cache shares: the values Job pods
// repeat (namespaces, node names, images, container and env names) are few,
// and a cluster whose pods repeat none cannot grow the table past this.
const maxInterned = 8192

// maxInternedLen: longer strings are kept as decoded, since a value that
// long is rarely repeated.
const maxInternedLen = 256

// interner is a table of shared strings: every pod decoded from the watch
// has its own copy of each string, so 20,000 pods of one Job template held
// 20,000 copies of the same image, namespace and node names.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

var podStrings = &interner{m: make(map[string]string)}

// intern returns the table's copy of s, adding s when it has none. A full
// table starts over: the strings already shared stay shared.
func (t *interner) intern(s string) string {
	if s == "" || len(s) > maxInternedLen {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(t.m) >= maxInterned {
		clear(t.m)
	}
	t.m[s] = s
	return s
}
