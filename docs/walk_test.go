package docs_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// architecture.md's walk of one job is a numbered list of steps followed
// by a list of the packages a job's id enters. TestWalk holds both to the
// code:
//
//   - every name a step gives in backticks exists: a package path (core/jobs
//     is internal/core/jobs, pkg/... as it is); a file of one of the
//     packages the step names; an identifier declared where its qualifier
//     says (jobs.Intake.Accept: a method, field or interface method of a
//     type of the package named jobs), or, unqualified, in one of the
//     step's packages; a subject, stream, bucket or event type of
//     pkg/events; a pollux command. A name that is none of these fails
//     the test too, so that the walk stays checkable.
//   - the closing list is closed under the imports of the data path: every
//     package of the module that a data-path package imports is listed —
//     on the data path, around it, or among those a job's id never enters
//     — and every data-path package is imported along the path from its
//     services. Every listed package is in a binary of the walk (ingest,
//     poller, webhook).
//
// What it cannot check is the prose: that a step does what the text says
// it does, or that a job's id really flows into a listed package (an
// import says the code can reach it, not that the id does). A renamed or
// removed name, a moved file and a new import on the data path fail it.

// page is the page with the walk, and walkHeading the walk's heading.
const (
	page        = "architecture.md"
	walkHeading = "## The walk of one job"
)

// walkRoots are the binaries the walk goes through.
var walkRoots = []string{"cmd/ingest", "cmd/poller", "cmd/webhook"}

// The closing list's groups.
const (
	onPath = "on the data path"
	around = "around it"
	never  = "never"
)

// walk is the walk as the page gives it.
type walk struct {
	steps [][]string          // each step's names in backticks
	lists map[string][]string // each group's package paths
}

var (
	stepStart  = regexp.MustCompile(`^\d+\. `)
	listStart  = regexp.MustCompile(`^- (` + onPath + `|` + around + `|` + never + `)\b[^:]*:`)
	backticked = regexp.MustCompile("`([^`]+)`")
)

// parseWalk reads the walk out of a page.
func parseWalk(text string) (walk, error) {
	_, section, ok := strings.Cut(text, walkHeading+"\n")
	if !ok {
		return walk{}, fmt.Errorf("no %q heading", walkHeading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	w := walk{lists: map[string][]string{}}
	var block *strings.Builder
	var group string // the list item's group; "" for a step
	flush := func() {
		if block == nil {
			return
		}
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(block.String(), -1) {
			names = append(names, m[1])
		}
		if group == "" {
			w.steps = append(w.steps, names)
		} else {
			w.lists[group] = append(w.lists[group], names...)
		}
		block = nil
	}
	for line := range strings.SplitSeq(section, "\n") {
		switch m := listStart.FindStringSubmatch(line); {
		case stepStart.MatchString(line):
			flush()
			block, group = &strings.Builder{}, ""
		case m != nil:
			flush()
			block, group = &strings.Builder{}, m[1]
		case block != nil && strings.HasPrefix(line, " ") && strings.TrimSpace(line) != "":
		default:
			flush()
			continue
		}
		block.WriteString(line + "\n")
	}
	flush()
	if len(w.steps) == 0 {
		return walk{}, fmt.Errorf("the walk has no numbered steps")
	}
	for _, g := range []string{onPath, around, never} {
		if len(w.lists[g]) == 0 {
			return walk{}, fmt.Errorf("the walk's closing list has no %q item", g)
		}
	}
	return w, nil
}

// checker resolves a walk's names against the code.
type checker struct {
	code     code
	contract contract
	commands map[string]bool
	named    []string // the packages the walk names, for qualifiers
}

var (
	pkgName   = regexp.MustCompile(`^(pkg|core|services|edge|platform|wiring|tools|testkit)(/[a-z0-9_*]+)+$`)
	fileName  = regexp.MustCompile(`^[a-z0-9_]+\.go$`)
	identName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$`)
)

func newChecker(c code, w walk) *checker {
	k := &checker{code: c, contract: readContract(), commands: commands()}
	for _, names := range append(slices.Clone(w.steps), slices.Collect(maps.Values(w.lists))...) {
		for _, n := range names {
			if pkgName.MatchString(n) {
				k.named = append(k.named, c.match(n)...)
			}
		}
	}
	return k
}

// steps checks every name of every step.
func (k *checker) steps(w walk) []string {
	var problems []string
	for i, names := range w.steps {
		for _, p := range k.step(names) {
			problems = append(problems, fmt.Sprintf("step %d: %s", i+1, p))
		}
	}
	return problems
}

// step checks one step's names.
func (k *checker) step(names []string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// The step's packages: those it names, and those its qualified names'
	// qualifiers name.
	var pkgs []*pkg
	add := func(p *pkg) {
		if !slices.Contains(pkgs, p) {
			pkgs = append(pkgs, p)
		}
	}
	for _, n := range names {
		switch {
		case pkgName.MatchString(n):
			for _, rel := range k.code.match(n) {
				add(k.code[rel])
			}
		case identName.MatchString(n) && strings.Contains(n, ".") && unicode.IsLower(rune(n[0])):
			if p, err := k.qualifier(n[:strings.Index(n, ".")]); err == nil {
				add(p)
			}
		}
	}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "pollux "):
			if !k.commands[n] {
				bad("`%s`: no such command", n)
			}
		case strings.HasPrefix(n, "pollux."):
			if !k.contract.subjects[n] {
				bad("`%s`: no subject of pkg/events (route sim, job <job>)", n)
			}
		case strings.HasPrefix(n, "POLLUX_"), strings.HasPrefix(n, "pollux-"):
			if !k.contract.streams[n] {
				bad("`%s`: no stream or bucket of pkg/events", n)
			}
		case pkgName.MatchString(n):
			if len(k.code.match(n)) == 0 {
				bad("`%s`: no such package (%s)", n, docPackage(n))
			}
		case fileName.MatchString(n):
			if !slices.ContainsFunc(pkgs, func(p *pkg) bool { return exists(p.dir, n) }) {
				bad("`%s`: no such file in the step's packages %s", n, rels(pkgs))
			}
		case k.contract.events[n]:
		case identName.MatchString(n):
			if err := k.identifier(n, pkgs); err != nil {
				bad("`%s`: %v", n, err)
			}
		default:
			bad("`%s`: not a name the walk can check (a package, file, identifier, subject, stream, event type or pollux command)", n)
		}
	}
	return problems
}

// qualifier finds the package a qualifier names: one the walk names by
// that package name, else the module's one package of that name.
func (k *checker) qualifier(name string) (*pkg, error) {
	find := func(rels []string) []*pkg {
		var out []*pkg
		for _, rel := range rels {
			if p := k.code[rel]; p.name == name && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	ps := find(k.named)
	if len(ps) == 0 {
		ps = find(slices.Collect(maps.Keys(k.code)))
	}
	if len(ps) != 1 {
		return nil, fmt.Errorf("the qualifier %s names %d packages %s", name, len(ps), rels(ps))
	}
	return ps[0], nil
}

// identifier checks a Go name: pkg.Name or pkg.Type.Member; Type.Member
// or Name in one of the step's packages.
func (k *checker) identifier(n string, pkgs []*pkg) error {
	parts := strings.Split(n, ".")
	if unicode.IsLower(rune(n[0])) && len(parts) > 1 {
		p, err := k.qualifier(parts[0])
		if err != nil {
			return err
		}
		pkgs, parts = []*pkg{p}, parts[1:]
	}
	for _, p := range pkgs {
		d, err := p.declared()
		if err != nil {
			return err
		}
		switch len(parts) {
		case 1:
			if d.top[parts[0]] || slices.ContainsFunc(slices.Collect(maps.Values(d.members)), func(m map[string]bool) bool { return m[parts[0]] }) {
				return nil
			}
		case 2:
			if d.top[parts[0]] && d.members[parts[0]][parts[1]] {
				return nil
			}
		}
	}
	return fmt.Errorf("not declared in %s", rels(pkgs))
}

// lists checks the closing list against the imports.
func (k *checker) lists(w walk) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	inBinaries := k.code.closure(walkRoots...)
	group := map[string]string{} // package -> its group
	var path []string            // the data path's packages
	for _, g := range []string{onPath, around, never} {
		for _, n := range w.lists[g] {
			if !pkgName.MatchString(n) {
				bad("%s: `%s` is not a package path", g, n)
				continue
			}
			found := false
			for _, rel := range k.code.match(n) {
				if !inBinaries[rel] {
					continue // a glob's package no binary of the walk links
				}
				found = true
				if was, ok := group[rel]; ok {
					bad("%s is listed twice: %s and %s", rel, was, g)
				}
				group[rel] = g
				if g == onPath {
					path = append(path, rel)
				}
			}
			if !found {
				bad("%s: `%s` names no package the walk's binaries %v link", g, n, walkRoots)
			}
		}
	}
	// Along the path: the data path's services and what they import.
	var services []string
	for _, rel := range path {
		if strings.HasPrefix(rel, "internal/services/") {
			services = append(services, rel)
		}
	}
	reached := k.code.closure(services...)
	for _, rel := range path {
		if !reached[rel] {
			bad("%s is on the data path, but none of its services %v imports it", rel, services)
		}
		for _, imp := range k.code[rel].imports {
			if _, ok := group[imp]; !ok {
				bad("%s (data path) imports %s, which the list does not name: on the data path, around it, or never entered", rel, imp)
			}
		}
	}
	return problems
}

func rels(ps []*pkg) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.rel)
	}
	return out
}

// TestWalk checks architecture.md's walk of one job against the code.
func TestWalk(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	w, err := parseWalk(string(b))
	require.NoError(t, err)
	c, err := loadCode()
	require.NoError(t, err)
	k := newChecker(c, w)
	for _, p := range append(k.steps(w), k.lists(w)...) {
		t.Errorf("%s, the walk: %s", page, p)
	}
}

// The checker fails on a stale name of every kind, and on a closing list
// that misses an import of the data path, names a package off it, or one
// no binary of the walk links.
func TestWalkCatchesStaleNames(t *testing.T) {
	t.Parallel()
	c, err := loadCode()
	require.NoError(t, err)
	k := newChecker(c, walk{steps: [][]string{{"pkg/events"}}})
	for _, tc := range []struct {
		names []string
		want  string // "" when every name resolves
	}{
		{[]string{"pkg/events", "messages.go", "events.DecodeSubmit", "events.Outcome.Settle", "DecodeSubmit", "Outcome.Settle",
			"submitted", "pollux.submit.sim", "pollux.events.sim.<job>", "POLLUX_INTAKE", "pollux-jobs", "pollux stats", "pollux routes pause"}, ""},
		{[]string{"pkg/events", "nosuch.go"}, "`nosuch.go`: no such file"},
		{[]string{"pkg/state", "messages.go"}, "`messages.go`: no such file"},
		{[]string{"events.NoSuch"}, "`events.NoSuch`: not declared"},
		{[]string{"events.Outcome.Nope"}, "`events.Outcome.Nope`: not declared"},
		{[]string{"pkg/state", "DecodeSubmit"}, "`DecodeSubmit`: not declared in [pkg/state]"},
		{[]string{"nosuch.Name"}, "the qualifier nosuch names 0 packages"},
		{[]string{"pollux.nosuch.sim"}, "no subject"},
		{[]string{"POLLUX_NOSUCH"}, "no stream or bucket"},
		{[]string{"pollux nosuch"}, "no such command"},
		{[]string{"core/nosuch"}, "no such package (internal/core/nosuch)"},
		{[]string{"two words"}, "not a name the walk can check"},
	} {
		got := k.step(tc.names)
		if tc.want == "" {
			require.Empty(t, got, tc.names)
			continue
		}
		require.Len(t, got, 1, tc.names)
		require.Contains(t, got[0], tc.want)
	}

	fake := code{}
	for rel, imports := range map[string][]string{
		"cmd/ingest":               {"internal/services/ingest", "internal/core/learn"},
		"internal/services/ingest": {"internal/core/jobs", "internal/platform/config"},
		"internal/core/jobs":       {"pkg/state"},
		"internal/core/learn":      nil,
		"internal/platform/config": nil,
		"pkg/state":                nil,
		"internal/tools/bench":     nil,
	} {
		fake[rel] = &pkg{rel: rel, imports: imports}
	}
	k = &checker{code: fake}
	complete := map[string][]string{onPath: {"services/ingest", "core/jobs", "pkg/state"}, never: {"platform/config"}}
	for _, tc := range []struct {
		name  string
		lists map[string][]string
		want  string
	}{
		{"complete", complete, ""},
		{"an import unlisted", map[string][]string{onPath: complete[onPath]},
			"internal/services/ingest (data path) imports internal/platform/config, which the list does not name"},
		{"off the path", map[string][]string{onPath: append(slices.Clone(complete[onPath]), "core/learn"), never: complete[never]},
			"internal/core/learn is on the data path, but none of its services"},
		{"in no binary", map[string][]string{onPath: complete[onPath], around: {"tools/bench"}, never: complete[never]},
			"`tools/bench` names no package the walk's binaries"},
		{"listed twice", map[string][]string{onPath: complete[onPath], never: {"platform/config", "pkg/state"}},
			"pkg/state is listed twice: on the data path and never"},
	} {
		got := k.lists(walk{lists: tc.lists})
		if tc.want == "" {
			require.Empty(t, got, tc.name)
			continue
		}
		require.NotEmpty(t, got, tc.name)
		require.Contains(t, strings.Join(got, "\n"), tc.want, tc.name)
	}
}
