package cases

import (
	"sort"
	"time"
)

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
