package generic

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// template is a request path with placeholders, such as
// "/v1/videos/{endpoint}/{id}" or "/v1/query/video_generation?task_id={id}".
// Values are escaped for where they stand: as a path segment before the
// '?', as a query value after it.
type template struct {
	parts []part
}

type part struct {
	literal string // text as written, when name is ""
	name    string // placeholder name
	query   bool   // the placeholder is in the query string
}

var (
	placeholderRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,31}$`)
	// plainRe is what a value must look like to fill a placeholder: ids,
	// models and endpoints are plain tokens, never paths.
	plainRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$`)
)

// parseTemplate compiles a template whose placeholders are among allowed.
func parseTemplate(s string, allowed map[string]bool) (template, error) {
	t := template{}
	if !strings.HasPrefix(s, "/") {
		return t, fmt.Errorf("%q does not start with /", s)
	}
	if strings.Contains(s, "#") {
		return t, fmt.Errorf("%q has a fragment", s)
	}
	inQuery := false
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.Contains(rest, "}") {
				return t, fmt.Errorf("%q: } without {", s)
			}
			t.parts = append(t.parts, part{literal: rest})
			break
		}
		lit := rest[:open]
		if strings.Contains(lit, "}") {
			return t, fmt.Errorf("%q: } without {", s)
		}
		if lit != "" {
			t.parts = append(t.parts, part{literal: lit})
			inQuery = inQuery || strings.Contains(lit, "?")
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return t, fmt.Errorf("%q: { without }", s)
		}
		name := rest[open+1 : open+end]
		if !placeholderRe.MatchString(name) {
			return t, fmt.Errorf("%q: {%s} is not a placeholder name", s, name)
		}
		if !allowed[name] {
			return t, fmt.Errorf("%q: {%s} is not available here (allowed: %s)", s, name, names(allowed))
		}
		t.parts = append(t.parts, part{name: name, query: inQuery})
		rest = rest[open+end+1:]
	}
	return t, nil
}

// names lists a placeholder set for an error message.
func names(set map[string]bool) string {
	var out []string
	for n := range set {
		out = append(out, "{"+n+"}")
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// render fills the placeholders from vals, escaping each value.
func (t template) render(vals map[string]string) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.literal)
			continue
		}
		v := vals[p.name]
		if v == "" {
			return "", fmt.Errorf("no value for {%s}", p.name)
		}
		if !plainRe.MatchString(v) {
			return "", fmt.Errorf("{%s}: %q is not a plain id", p.name, clip(v, 200))
		}
		if p.query {
			b.WriteString(url.QueryEscape(v))
		} else {
			b.WriteString(url.PathEscape(v))
		}
	}
	return b.String(), nil
}
