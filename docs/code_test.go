package docs_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"github.com/pollux-dev/pollux/internal/tools/cli"
	"github.com/pollux-dev/pollux/pkg/events"
)

// The code the docs are checked against: the module's packages as the
// default build sees them (go/build: no test files, no files behind a
// build tag such as faultpoints), their imports, and the names each
// declares (go/parser, no type checking).

// modulePath is the module's import path; root its directory from here.
const (
	modulePath = "github.com/pollux-dev/pollux"
	root       = ".."
)

// pkg is one package of the module.
type pkg struct {
	rel     string   // path from the module root: pkg/events, internal/core/jobs
	name    string   // package name
	dir     string   // directory
	files   []string // its Go files in the default build
	imports []string // the module packages it imports, as rel paths
	decls   *decls   // read on first use
}

// decls are the names a package declares.
type decls struct {
	top     map[string]bool            // package-level funcs, types, vars, consts
	members map[string]map[string]bool // a type's methods, fields, interface methods
}

// code is the module's packages by rel path.
type code map[string]*pkg

// loadCode reads every package under the module's cmd, internal, pkg and
// polluxtest directories.
func loadCode() (code, error) {
	c := code{}
	for _, top := range []string{"cmd", "internal", "pkg", "polluxtest"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(dir string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			bp, err := build.Default.ImportDir(dir, 0)
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", dir, err)
			}
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return err
			}
			p := &pkg{rel: filepath.ToSlash(rel), name: bp.Name, dir: dir, files: bp.GoFiles}
			for _, imp := range bp.Imports {
				if r, ok := strings.CutPrefix(imp, modulePath+"/"); ok {
					p.imports = append(p.imports, r)
				}
			}
			c[p.rel] = p
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// docPackage is the package a doc's package path names: pkg/... as it
// is, anything else under internal/ (core/jobs is internal/core/jobs).
func docPackage(p string) string {
	if strings.HasPrefix(p, "pkg/") {
		return p
	}
	return "internal/" + p
}

// match returns the packages a doc's package path, or glob
// (pkg/provider/*), names.
func (c code) match(doc string) []string {
	want := docPackage(doc)
	var out []string
	for rel := range c {
		if ok, _ := path.Match(want, rel); ok {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}

// closure returns the packages the roots import, directly or not, roots
// included.
func (c code) closure(roots ...string) map[string]bool {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(rel string) {
		if seen[rel] || c[rel] == nil {
			return
		}
		seen[rel] = true
		for _, imp := range c[rel].imports {
			visit(imp)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return seen
}

// declared reads the names p declares.
func (p *pkg) declared() (*decls, error) {
	if p.decls != nil {
		return p.decls, nil
	}
	d := &decls{top: map[string]bool{}, members: map[string]map[string]bool{}}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
	}
	fset := token.NewFileSet()
	for _, f := range p.files {
		file, err := parser.ParseFile(fset, filepath.Join(p.dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range file.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					d.top[decl.Name.Name] = true
					continue
				}
				member(receiver(decl.Recv.List[0].Type), decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						d.top[spec.Name.Name] = true
						for _, name := range fieldNames(spec.Type) {
							member(spec.Name.Name, name)
						}
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							d.top[n.Name] = true
						}
					}
				}
			}
		}
	}
	p.decls = d
	return d, nil
}

// receiver is the type name of a method's receiver (T, *T, T[K]).
func receiver(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// fieldNames are a struct's fields or an interface's methods.
func fieldNames(e ast.Expr) []string {
	var list *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		for _, n := range f.Names {
			out = append(out, n.Name)
		}
	}
	return out
}

// contract is what pkg/events names: the subjects a route "sim" and a job
// "<job>" have, the streams and buckets, the event types.
type contract struct {
	subjects, streams, events map[string]bool
}

// readContract calls every method of events.Default that takes up to two
// strings and returns one: with no argument it names a stream or a
// bucket; with a route and a job, a subject.
func readContract() contract {
	c := contract{subjects: map[string]bool{}, streams: map[string]bool{}, events: map[string]bool{}}
	ns := reflect.ValueOf(events.Default)
	str := reflect.TypeFor[string]()
	args := []reflect.Value{reflect.ValueOf("sim"), reflect.ValueOf("<job>")}
methods:
	for i := range ns.NumMethod() {
		m := ns.Method(i)
		mt := m.Type()
		if mt.NumOut() != 1 || mt.Out(0) != str || mt.NumIn() > len(args) {
			continue
		}
		for j := range mt.NumIn() {
			if mt.In(j) != str {
				continue methods
			}
		}
		name := m.Call(args[:mt.NumIn()])[0].String()
		if mt.NumIn() == 0 {
			c.streams[name] = true
		} else {
			c.subjects[name] = true
		}
	}
	for _, typ := range events.EventTypes {
		c.events[typ] = true
	}
	return c
}

// commands are the pollux command's commands, as "pollux jobs" and
// "pollux routes pause".
func commands() map[string]bool {
	out := map[string]bool{}
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if _, ok := f.Tag.Lookup("cmd"); !ok {
				continue
			}
			name := f.Tag.Get("name")
			if name == "" {
				name = kebab(f.Name)
			}
			out[prefix+" "+name] = true
			walk(prefix+" "+name, f.Type)
		}
	}
	walk("pollux", reflect.TypeFor[cli.CLI]())
	return out
}

// kebab spells a Go field name as kong names its command: SimProvider is
// sim-provider.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// exists reports whether a file is in dir.
func exists(dir, file string) bool {
	st, err := os.Stat(filepath.Join(dir, file))
	return err == nil && !st.IsDir()
}
