package config_test

//go:generate go test -run TestConfigurationReference -update .

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
)

// The configuration reference in docs/configuration.md is generated from
// the config types: their yaml tags, Go types and doc comments. The test
// regenerates it and fails when the committed file differs, so a field
// added, renamed or removed without the docs following fails here.

var update = flag.Bool("update", false, "rewrite the generated part of docs/configuration.md")

const (
	referenceFile  = "../../../docs/configuration.md"
	referenceBegin = "<!-- BEGIN GENERATED: go generate ./internal/platform/config -->"
	referenceEnd   = "<!-- END GENERATED -->"
)

func TestConfigurationReference(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var sources []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			sources = append(sources, f)
		}
	}
	ref, err := reference(reflect.TypeFor[config.Config](), sources)
	require.NoError(t, err)

	doc, err := os.ReadFile(referenceFile)
	require.NoError(t, err)
	before, rest, ok := bytes.Cut(doc, []byte(referenceBegin+"\n"))
	require.True(t, ok, "%s has no %q line", referenceFile, referenceBegin)
	committed, after, ok := bytes.Cut(rest, []byte(referenceEnd))
	require.True(t, ok, "%s has no %q line", referenceFile, referenceEnd)

	if *update {
		out := bytes.Join([][]byte{before, []byte(referenceBegin + "\n"), ref, []byte(referenceEnd), after}, nil)
		require.NoError(t, os.WriteFile(referenceFile, out, 0o644))
		return
	}
	if !bytes.Equal(committed, ref) {
		t.Fatalf("docs/configuration.md does not describe the config types: run `go generate ./internal/platform/config` and commit it.\n%s",
			firstDifference(string(committed), string(ref)))
	}
}

// TestReferenceRules checks that the generator refuses a field it cannot
// document: one without a doc comment, or whose comment states neither a
// default nor that it is required.
func TestReferenceRules(t *testing.T) {
	t.Parallel()
	_, err := reference(reflect.TypeFor[undocumented](), []string{"reference_test.go"})
	require.ErrorContains(t, err, "undocumented.Field (field): no doc comment")
	_, err = reference(reflect.TypeFor[noDefault](), []string{"reference_test.go"})
	require.ErrorContains(t, err, "noDefault.Field (field): the comment states no default")
	ref, err := reference(reflect.TypeFor[documented](), []string{"reference_test.go"})
	require.NoError(t, err)
	require.Contains(t, string(ref), "| `field` | duration | 5s | `field` is documented (default 5s). |")
	require.Contains(t, string(ref), "| `needed` | string | required | `needed` must be given (required). |")
}

type undocumented struct {
	Field int `yaml:"field"`
}

type noDefault struct {
	// Field is documented, but not its default.
	Field int `yaml:"field"`
}

type documented struct {
	// Field is documented (default 5s).
	Field time.Duration `yaml:"field"`
	// Needed must be given (required).
	Needed string `yaml:"needed"`
}

// goDocs are the doc comments of a package's struct types and their fields.
type goDocs struct {
	types  map[string]string
	fields map[string]map[string]string // type → field → comment
}

func parseDocs(files []string) (goDocs, error) {
	d := goDocs{types: map[string]string{}, fields: map[string]map[string]string{}}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return d, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				d.types[ts.Name.Name] = doc.Text()
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				fields := map[string]string{}
				for _, fl := range st.Fields.List {
					for _, n := range fl.Names {
						fields[n.Name] = fl.Doc.Text()
					}
				}
				d.fields[ts.Name.Name] = fields
			}
		}
	}
	return d, nil
}

// reference renders the reference of root and every struct type reachable
// from it: a section per type, a row per yaml field.
func reference(root reflect.Type, files []string) ([]byte, error) {
	docs, err := parseDocs(files)
	if err != nil {
		return nil, err
	}
	var (
		order []reflect.Type
		paths = map[reflect.Type][]string{}
	)
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		if _, seen := paths[t]; !seen {
			order = append(order, t)
		}
		paths[t] = append(paths[t], path)
		for _, f := range yamlFields(t) {
			if st := structOf(f.Type); st != nil {
				walk(st, join(path, yamlName(f)+keySuffix(f.Type)))
			}
		}
	}
	walk(root, "")

	var b strings.Builder
	for _, t := range order {
		fmt.Fprintf(&b, "\n## %s\n\n", t.Name())
		var at []string
		for _, p := range paths[t] {
			if p == "" {
				p = "the file's top level"
			} else {
				p = "`" + p + "`"
			}
			at = append(at, p)
		}
		fmt.Fprintf(&b, "At %s. %s\n\n", strings.Join(at, ", "), oneLine(docs.types[t.Name()]))
		b.WriteString("| field | type | default | meaning |\n|---|---|---|---|\n")
		for _, f := range yamlFields(t) {
			doc, ok := docs.fields[t.Name()][f.Name]
			where := fmt.Sprintf("%s.%s (%s)", t.Name(), f.Name, yamlName(f))
			if !ok || strings.TrimSpace(doc) == "" {
				return nil, fmt.Errorf("%s: no doc comment", where)
			}
			meaning := oneLine(doc)
			if rest, ok := strings.CutPrefix(meaning, f.Name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ",")) {
				meaning = "`" + yamlName(f) + "`" + rest
			}
			def := "—"
			if structOf(f.Type) == nil || f.Type.Kind() == reflect.Pointer {
				if def = defaultOf(meaning); def == "" {
					return nil, fmt.Errorf("%s: the comment states no default (write \"(default …)\" or \"(required)\")", where)
				}
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", yamlName(f), typeName(f.Type), cell(def), cell(meaning))
		}
	}
	return []byte(b.String()), nil
}

func yamlFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && yamlName(f) != "-" {
			out = append(out, f)
		}
	}
	return out
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

// structOf is the struct type a field's value is or holds (through a
// pointer, map or list), or nil.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Time]() {
		return t
	}
	return nil
}

// keySuffix is what a path adds for a map's key or a list's index.
func keySuffix(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map:
		return ".<name>"
	case reflect.Slice:
		return "[]"
	}
	return ""
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t == reflect.TypeFor[config.Rate]():
		return "rate"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return "map"
		}
		return "map of name → " + typeName(t.Elem())
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Struct:
		return fmt.Sprintf("[%s](#%s)", t.Name(), strings.ToLower(t.Name()))
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	}
	return t.String()
}

var (
	defaultRE  = regexp.MustCompile(`(?i)\bdefault:?\s+(.+?)(?:[;)]|:\s|\.\s|\.?$)`)
	requiredRE = regexp.MustCompile(`[(;]\s*required\b`)
)

// defaultOf reads the default a comment states: what follows "default"
// up to a semicolon, a closing parenthesis, a colon or the end of a
// sentence, else "required" where it says so.
func defaultOf(comment string) string {
	if m := defaultRE.FindStringSubmatch(comment); m != nil {
		return strings.TrimSpace(m[1])
	}
	if requiredRE.MatchString(comment) {
		return "required"
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// firstDifference shows the first line where the committed reference and
// the generated one part.
func firstDifference(committed, generated string) string {
	c, g := strings.Split(committed, "\n"), strings.Split(generated, "\n")
	for i := range max(len(c), len(g)) {
		var cl, gl string
		if i < len(c) {
			cl = c[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if cl != gl {
			return fmt.Sprintf("first difference at line %d of the generated part:\ncommitted: %s\ngenerated: %s", i+1, cl, gl)
		}
	}
	return ""
}
