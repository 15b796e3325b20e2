package docs

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// layoutSection is the heading of design.md's section with the layout map.
const layoutSection = "## Architecture and layout"

// goDirs returns the directories under root that hold Go files, as
// slash-separated paths relative to root ("host/hostprom"). Hidden directories
// are skipped; testdata directories count when they hold Go programs.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if len(dirs) == 0 || dirs[len(dirs)-1] != rel {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// layoutMap returns the paths the layout map of design.md names, in order,
// without their trailing slash, and the width of its path column.
func layoutMap(t *testing.T) (paths []string, width int) {
	t.Helper()
	f, err := os.Open("design.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, fenced := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == layoutSection:
			in = true
		case !in:
		case strings.HasPrefix(line, "## "):
			t.Fatalf("design.md: section %q has no ``` block with the layout map", layoutSection)
		case line == "```" && fenced:
			return paths, width
		case line == "```":
			fenced = true
		case fenced && line != "" && !strings.HasPrefix(line, " "):
			path := strings.Fields(line)[0]
			paths = append(paths, strings.TrimSuffix(path, "/"))
			width = max(width, len(line)-len(strings.TrimLeft(line[len(path):], " ")))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("design.md: no section %q with a ``` block holding the layout map", layoutSection)
	return nil, 0
}

// purpose is the first sentence of dir's package comment (from doc.go), less
// its "Package x is" or "Command x is" opening: a start for the map's line.
func purpose(dir string) string {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil || f.Doc == nil {
		return "what it is for (say it in " + dir + "/doc.go too)"
	}
	text := strings.Join(strings.Fields(f.Doc.Text()), " ")
	if i := strings.IndexAny(text, ".:;"); i >= 0 {
		text = text[:i]
	}
	words := strings.Fields(text)
	if len(words) > 3 && (words[0] == "Package" || words[0] == "Command") && words[2] == "is" {
		words = words[3:]
	} else if len(words) > 2 && (words[0] == "Package" || words[0] == "Command") {
		words = words[2:]
	}
	return strings.Join(words, " ")
}

// TestLayoutMapListsEveryPackage fails when a directory holding Go code is
// missing from design.md's layout map, or when the map names a path that is
// no longer in the tree, so the map cannot go stale. Its message gives the
// exact line to add (or remove) and where.
func TestLayoutMapListsEveryPackage(t *testing.T) {
	paths, width := layoutMap(t)
	listed := map[string]bool{}
	for _, p := range paths {
		listed[p] = true
	}
	for _, dir := range goDirs(t) {
		if listed[dir] {
			continue
		}
		after := "at the top"
		for _, p := range paths {
			if p < dir {
				after = fmt.Sprintf("after the line for %s/", p)
			}
		}
		line := fmt.Sprintf("%-*s%s", width, dir+"/", purpose(dir))
		t.Errorf("docs/design.md, %q: the layout map lacks package directory %s/. Fix: add this line to the map's ``` block, %s (and adjust its words to say what the package is for):\n%s",
			layoutSection, dir, after, line)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("docs/design.md, %q: the layout map names %s/, which is not in the tree. Fix: remove its line from the map's ``` block, or rename it to where the code went", layoutSection, p)
		}
	}
}

// TestEveryPackageHasDocGo holds every directory of Go code to a doc.go that
// carries its package comment (docs/design.md, "Architecture and layout").
func TestEveryPackageHasDocGo(t *testing.T) {
	for _, dir := range goDirs(t) {
		path := filepath.Join(root, dir, "doc.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		switch {
		case err != nil:
			t.Errorf("%s/ has no doc.go that parses (%v). Fix: add %s/doc.go with a package comment that says in a few lines what the package is for", dir, err, dir)
		case f.Doc == nil:
			t.Errorf("%s/doc.go has no package comment. Fix: say in a few lines above its package clause what the package is for", dir)
		}
	}
}
