package generic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Path is a compiled JSON path: keys separated by dots, each optionally
// followed by indexes, [n] for one element or [*] for all of them, as in
// "data.task_result.videos[*].url" or "[0].id". Keys are matched exactly
// and cannot contain '.', '[' or ']'.
type Path struct {
	text  string
	steps []step
}

type stepKind int

const (
	stepKey stepKind = iota
	stepIndex
	stepAll
)

type step struct {
	kind  stepKind
	key   string
	index int
}

// maxPathSteps bounds a path's length.
const maxPathSteps = 32

// ParsePath compiles a path, naming what is wrong with a bad one.
func ParsePath(s string) (Path, error) {
	p := Path{text: s}
	if s == "" {
		return p, errors.New("empty path")
	}
	i := 0
	for i < len(s) {
		switch s[i] {
		case '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return p, fmt.Errorf("path %q: unclosed [", s)
			}
			inner := s[i+1 : i+end]
			if inner == "*" {
				p.steps = append(p.steps, step{kind: stepAll})
			} else {
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 || len(inner) > 9 || (len(inner) > 1 && inner[0] == '0') {
					return p, fmt.Errorf("path %q: [%s] is not an index or *", s, inner)
				}
				p.steps = append(p.steps, step{kind: stepIndex, index: n})
			}
			i += end + 1
			if i < len(s) && s[i] != '.' && s[i] != '[' {
				return p, fmt.Errorf("path %q: unexpected %q after ]", s, s[i])
			}
		case '.', ']':
			return p, fmt.Errorf("path %q: unexpected %q at %d", s, s[i], i)
		default:
			end := strings.IndexAny(s[i:], ".[]")
			if end < 0 {
				end = len(s) - i
			}
			p.steps = append(p.steps, step{kind: stepKey, key: s[i : i+end]})
			i += end
		}
		if i < len(s) && s[i] == '.' {
			i++
			if i == len(s) || s[i] == '.' || s[i] == '[' {
				return p, fmt.Errorf("path %q: a dot must be followed by a key", s)
			}
		}
		if len(p.steps) > maxPathSteps {
			return p, fmt.Errorf("path %q: more than %d steps", s, maxPathSteps)
		}
	}
	return p, nil
}

// String returns the path as written.
func (p Path) String() string { return p.text }

// IsZero reports whether the path is unset.
func (p Path) IsZero() bool { return len(p.steps) == 0 }

// Eval returns the values the path selects in a decoded JSON document
// (as encoding/json decodes into any), in document order; none when a key
// or index is missing or a step meets the wrong kind of value.
func (p Path) Eval(doc any) []any {
	if p.IsZero() {
		return nil
	}
	cur := []any{doc}
	for _, s := range p.steps {
		var next []any
		for _, v := range cur {
			switch s.kind {
			case stepKey:
				if m, ok := v.(map[string]any); ok {
					if e, ok := m[s.key]; ok {
						next = append(next, e)
					}
				}
			case stepIndex:
				if a, ok := v.([]any); ok && s.index < len(a) {
					next = append(next, a[s.index])
				}
			case stepAll:
				if a, ok := v.([]any); ok {
					next = append(next, a...)
				}
			}
		}
		if len(next) == 0 {
			return nil
		}
		cur = next
	}
	return cur
}

// First returns the first value the path selects.
func (p Path) First(doc any) (any, bool) {
	v := p.Eval(doc)
	if len(v) == 0 {
		return nil, false
	}
	return v[0], true
}

// scalar renders a JSON scalar as text: a string as is, a number as written,
// a boolean as true or false. Objects, arrays and null are not scalars.
func scalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}
