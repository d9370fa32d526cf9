package decision

import (
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
)

// The image references the decision reads, parsed once each. The pod
// cache's transform asks Considered of every pod event, which validates
// each marked container's quick-exit image and checks it against the
// allowlist, and Classify asks it again in each sync: the same few strings
// (the images pods name and the allowlist's entries), parsed by
// go-containerregistry again and again. In e2e/bench's profile of a
// 20,000-pod burst those parses were 0.2 s of the controller's 18.1 s
// sampled, and a garbage of 12.5 MB. A parse depends on its string alone,
// so its answer is kept; the memory is bounded: at most maxParsed strings,
// each at most MaxValueLen bytes, and emptied when full.

// imageRef is what the decision reads of a parsed reference: its full name
// (name.Reference.Name) and its repository's (Context().Name()), or the
// parse's error.
type imageRef struct {
	name, repository string
	err              error
}

const maxParsed = 256

var parsed = struct {
	sync.Mutex
	images, repositories map[string]imageRef
}{images: map[string]imageRef{}, repositories: map[string]imageRef{}}

// parsedImage is name.ParseReference(s), as imageRef.
func parsedImage(s string) imageRef {
	return parsedOnce(parsed.images, s, func() imageRef {
		ref, err := name.ParseReference(s)
		if err != nil {
			return imageRef{err: err}
		}
		return imageRef{name: ref.Name(), repository: ref.Context().Name()}
	})
}

// parsedRepository is name.NewRepository(s), as imageRef (its name is the
// repository's).
func parsedRepository(s string) imageRef {
	return parsedOnce(parsed.repositories, s, func() imageRef {
		repo, err := name.NewRepository(s)
		if err != nil {
			return imageRef{err: err}
		}
		return imageRef{name: repo.Name()}
	})
}

func parsedOnce(memo map[string]imageRef, s string, parse func() imageRef) imageRef {
	if TooLong(s) {
		return parse()
	}
	parsed.Lock()
	ref, ok := memo[s]
	parsed.Unlock()
	if ok {
		return ref
	}
	ref = parse()
	parsed.Lock()
	if len(memo) >= maxParsed {
		clear(memo)
	}
	memo[s] = ref
	parsed.Unlock()
	return ref
}
