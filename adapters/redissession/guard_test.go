package redissession

import (
	"fmt"
	"testing"
)

// TestGuardRefusesAReadOnlyWhenItsKeyMayHaveBeenReported: the guard's rule
// on keys that share one word (distinct tags), and on one of another word.
// A read refuses whenever its own key was reported while it was in flight,
// even when its key was also the last reported before it began (the case a
// word that counted only changes of key would miss); reports of one other
// key, however many, leave it free to cache; reports of two other keys of
// its word refuse it (the guard's precision, not a requirement).
func TestGuardRefusesAReadOnlyWhenItsKeyMayHaveBeenReported(t *testing.T) {
	// b and c share own's word, with tags of their own; elsewhere does not.
	w0, tag0 := probe.word("own")
	keys, tags := []string{"own"}, map[uint32]bool{tag0: true}
	var elsewhere string
	for i := 0; len(keys) < 3 || elsewhere == ""; i++ {
		k := fmt.Sprint("other-", i)
		switch w, tag := probe.word(k); {
		case w != w0:
			elsewhere = k
		case !tags[tag] && len(keys) < 3:
			tags[tag] = true
			keys = append(keys, k)
		}
	}
	own, b, c := keys[0], keys[1], keys[2]
	names := map[string]string{own: "own", b: "b", c: "c", elsewhere: "elsewhere"}
	for _, tc := range []struct {
		before, during []string
		quiet          bool
	}{
		{nil, nil, true},
		{[]string{own, own}, nil, true},
		{nil, []string{elsewhere, elsewhere}, true},
		{nil, []string{b, b}, true},
		{[]string{b}, []string{b, b}, true},
		{[]string{own, b}, []string{b}, true},
		{nil, []string{own}, false},
		{[]string{own, own}, []string{own}, false},
		{nil, []string{own, b, b}, false},
		{[]string{b}, []string{own, b}, false},
		{nil, []string{b, c}, false},
		{[]string{b}, []string{c, b}, false},
	} {
		var g guard
		for _, k := range tc.before {
			g.report(k)
		}
		var r reading
		r.word, r.tag = g.word(own)
		r.was = r.word.Load()
		for _, k := range tc.during {
			g.report(k)
		}
		if got := r.quiet(); got != tc.quiet {
			t.Errorf("reported %v before the read began and %v during it: quiet %v, want %v",
				nameAll(names, tc.before), nameAll(names, tc.during), got, tc.quiet)
		}
	}
}

func nameAll(names map[string]string, keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = names[k]
		if out[i] == "" {
			out[i] = k
		}
	}
	return out
}
