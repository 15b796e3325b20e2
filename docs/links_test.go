package docs

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// linkedPackages are the packages whose docs link the identifiers they
// mention with Go's [Name] doc links (issue 24, "Names and docs").
var linkedPackages = []string{"cache", "pgo", "remote"}

// loadDoc reads dir's package (test files aside) as go doc sees it.
func loadDoc(t *testing.T, dir string) *doc.Package {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) > 0 {
		d, err := doc.NewFromFiles(fset, files, "github.com/kiln-dev/kiln/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Fatalf("%s: no Go package", dir)
	return nil
}

// comments returns every doc comment of d that go doc shows: the package's,
// its declarations' and their methods' and struct fields'.
func comments(d *doc.Package) []string {
	out := []string{d.Doc}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			out = append(out, v.Doc)
		}
	}
	funcs := func(fs []*doc.Func) {
		for _, f := range fs {
			out = append(out, f.Doc)
		}
	}
	values(d.Consts)
	values(d.Vars)
	funcs(d.Funcs)
	for _, t := range d.Types {
		out = append(out, t.Doc)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs)
		funcs(t.Methods)
		for _, s := range t.Decl.Specs {
			ts, ok := s.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, f := range st.Fields.List {
					if f.Doc != nil {
						out = append(out, f.Doc.Text())
					}
				}
			}
		}
	}
	return out
}

// plains calls fn with each run of plain text of c and each doc link.
func plains(c *comment.Doc, fn func(plain string, link *comment.DocLink)) {
	var walk func([]comment.Text)
	walk = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case comment.Plain:
				fn(string(t), nil)
			case *comment.Italic:
				fn(string(*t), nil)
			case *comment.DocLink:
				fn("", t)
			case *comment.Link:
				walk(t.Text)
			}
		}
	}
	for _, b := range c.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						walk(p.Text)
					}
				}
			}
		}
	}
}

// TestDocLinksResolve fails on a [Name] in the docs of cache, pgo or remote
// that go doc cannot resolve (it then shows the brackets as text).
func TestDocLinksResolve(t *testing.T) {
	bracketed := regexp.MustCompile(`\[\*?[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)*\]`)
	for _, dir := range linkedPackages {
		d := loadDoc(t, dir)
		for _, text := range comments(d) {
			plains(d.Parser().Parse(text), func(plain string, _ *comment.DocLink) {
				for _, m := range bracketed.FindAllString(plain, -1) {
					t.Errorf("%s: doc link %s does not resolve (go doc shows it as text). Fix: name an exported identifier of %s (Name or Type.Method), or an imported package's (pkg.Name)", dir, m, dir)
				}
			})
		}
	}
}

// TestPackageDocsLinkTheirIdentifiers fails when the package doc of cache,
// pgo or remote mentions one of the package's exported top-level identifiers
// without linking it anywhere in that doc.
func TestPackageDocsLinkTheirIdentifiers(t *testing.T) {
	// A word is a name or a qualified one (host.Options.Remote), which
	// names another package's identifier and is left alone.
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*`)
	for _, dir := range linkedPackages {
		d := loadDoc(t, dir)
		exported := map[string]bool{}
		for _, v := range append(append([]*doc.Value{}, d.Consts...), d.Vars...) {
			for _, n := range v.Names {
				exported[n] = true
			}
		}
		for _, f := range d.Funcs {
			exported[f.Name] = true
		}
		for _, ty := range d.Types {
			exported[ty.Name] = true
			for _, v := range append(append([]*doc.Value{}, ty.Consts...), ty.Vars...) {
				for _, n := range v.Names {
					exported[n] = true
				}
			}
			for _, f := range ty.Funcs {
				exported[f.Name] = true
			}
		}
		linked, mentioned := map[string]bool{}, map[string]bool{}
		var order []string
		plains(d.Parser().Parse(d.Doc), func(plain string, link *comment.DocLink) {
			if link != nil {
				if link.ImportPath == "" && link.Recv == "" {
					linked[link.Name] = true
				}
				return
			}
			for _, w := range word.FindAllString(plain, -1) {
				if exported[w] && !mentioned[w] {
					mentioned[w] = true
					order = append(order, w)
				}
			}
		})
		for _, w := range order {
			if !linked[w] {
				t.Errorf("%s/doc.go mentions %s without a doc link. Fix: write [%s] at its first mention", dir, w, w)
			}
		}
	}
}
