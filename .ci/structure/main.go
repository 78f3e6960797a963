// Command structure measures the module's production packages, so that no
// size or structure figure is taken by hand. Run it from the
// module's root:
//
//	go run ./.ci/structure              # print, and fail when a limit is broken
//	go run ./.ci/structure -limits=false # print only
//
// Per package it prints the code lines (lines that hold code: not blank, not
// only a comment), the largest file in code lines, and the largest file cycle:
// the largest strongly connected component of the package's file-reference
// graph, where file A references file B when an identifier in A resolves
// (go/types) to something declared at top level in B: a constant, variable,
// type or function, or a method. A struct's field is declared inside its type,
// not at top level: reading it needs the type, whose file is referenced by
// whatever names the type or makes its values.
//
// Test files, testdata, bench/ and the .ci/ tools are left out. A file that a
// build constraint excludes on this platform counts for its lines but takes
// no part in the graph (it cannot be type-checked with the others).
//
// The limits: no package's largest file cycle over maxCycle files, and no
// production file over maxFileLines code lines except the ones in
// allowedLarge (a file that holds one concern may stay big; two concerns in
// one file is the smell).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

const (
	// maxCycle is Caddy's own: its reverseproxy package holds a file cycle
	// of 8. A limit serves the code or it goes: below that, files were
	// split only to meet it (14 lines "to get cycles back under six").
	maxCycle     = 8
	maxFileLines = 600
)

// allowedLarge names the files, relative to the module root, that may pass
// maxFileLines: the JSON member scanner is one concern.
var allowedLarge = map[string]bool{
	"internal/jsonmember/scan.go": true,
}

// listed is what `go list -json` says of a package (the fields asked for).
type listed struct {
	ImportPath     string
	Dir            string
	Export         string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	Standard       bool
	Module         *struct{ Main bool }
}

// report is one package's figures.
type report struct {
	path      string // relative to the module root
	files     int
	code      int
	largest   string // file name
	largestN  int
	cycle     []string // the files of the largest cycle, sorted
	graph     map[string][]string
	tooLarge  []string // "file (N)" over maxFileLines and not allowed
	typeError error    // the first, if type-checking failed
}

func main() {
	limits := flag.Bool("limits", true, "exit non-zero when a limit is broken")
	verbose := flag.Bool("v", false, "name the files of each package's largest cycle")
	graphOf := flag.String("graph", "", "print the file-reference graph of this package (its directory, e.g. engines)")
	flag.Parse()
	reports, err := measure()
	if err != nil {
		fmt.Fprintln(os.Stderr, "structure:", err)
		os.Exit(2)
	}
	if *graphOf != "" {
		printGraph(os.Stdout, reports, *graphOf)
		return
	}
	broken := print(os.Stdout, reports, *verbose)
	if broken > 0 && *limits {
		fmt.Fprintf(os.Stderr, "structure: %d limit(s) broken (cycle ≤ %d files, file ≤ %d code lines)\n", broken, maxCycle, maxFileLines)
		os.Exit(1)
	}
}

// measure lists the module's packages with their export data (so that
// imports type-check without reading their source) and measures the
// production ones.
func measure() ([]report, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("go", "list", "-e", "-export", "-deps",
		"-json=ImportPath,Dir,Export,GoFiles,CgoFiles,IgnoredGoFiles,Standard,Module", "./...").Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v", err)
	}
	exports := map[string]string{}
	var mine []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list: %v", err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Main && production(root, p.Dir) {
			mine = append(mine, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var reports []report
	for _, p := range mine {
		r, err := measurePackage(fset, imp, root, p)
		if err != nil {
			return nil, err
		}
		if r.files > 0 {
			reports = append(reports, r)
		}
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].path < reports[j].path })
	return reports, nil
}

// production reports whether a package directory counts: not under bench/,
// testdata or a directory whose name starts with "." or "_".
func production(root, dir string) bool {
	rel, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	for i, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "testdata" || strings.HasPrefix(part, ".") && part != "." || strings.HasPrefix(part, "_") {
			return false
		}
		if i == 0 && part == "bench" {
			return false
		}
	}
	return true
}

func measurePackage(fset *token.FileSet, imp types.Importer, root string, p listed) (report, error) {
	rel, _ := filepath.Rel(root, p.Dir)
	r := report{path: filepath.ToSlash(rel)}
	checked := append(append([]string{}, p.GoFiles...), p.CgoFiles...)
	all := append(append([]string{}, checked...), p.IgnoredGoFiles...)
	for _, name := range all {
		if strings.HasSuffix(name, "_test.go") || !strings.HasSuffix(name, ".go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(p.Dir, name))
		if err != nil {
			return r, err
		}
		n := codeLines(src)
		r.files++
		r.code += n
		if n > r.largestN || n == r.largestN && name < r.largest {
			r.largest, r.largestN = name, n
		}
		if n > maxFileLines && !allowedLarge[pathJoin(r.path, name)] {
			r.tooLarge = append(r.tooLarge, fmt.Sprintf("%s (%d)", name, n))
		}
	}
	var files []*ast.File
	for _, name := range checked {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return r, err
		}
		files = append(files, f)
	}
	graph, err := fileGraph(fset, p.ImportPath, files, imp)
	r.typeError = err
	r.cycle = largestCycle(graph)
	r.graph = graph
	return r, nil
}

func pathJoin(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// fileGraph type-checks one package's files and returns, for each file's base
// name, the other files it references. An error is the first type error; the
// graph holds what could be resolved.
func fileGraph(fset *token.FileSet, path string, files []*ast.File, imp types.Importer) (map[string][]string, error) {
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	var first error
	conf := types.Config{Importer: imp, Error: func(err error) {
		if first == nil {
			first = err
		}
	}}
	pkg, _ := conf.Check(path, fset, files, info)
	edges := map[string]map[string]bool{}
	graph := map[string][]string{}
	for _, f := range files {
		graph[fileName(fset, f.Pos())] = nil
	}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !topLevel(obj) {
			return
		}
		from, to := fileName(fset, at), fileName(fset, obj.Pos())
		if from == to {
			return
		}
		if edges[from] == nil {
			edges[from] = map[string]bool{}
		}
		edges[from][to] = true
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	// a promoted field or method reached through an embedded one is used
	// through the selection's object as well
	for sel, s := range info.Selections {
		add(sel.Sel.Pos(), s.Obj())
	}
	for from, tos := range edges {
		for to := range tos {
			graph[from] = append(graph[from], to)
		}
		sort.Strings(graph[from])
	}
	return graph, first
}

// topLevel reports whether obj is declared at a package's top level: in the
// package scope, or a method.
func topLevel(obj types.Object) bool {
	if obj.Parent() == obj.Pkg().Scope() {
		return true
	}
	if f, ok := obj.(*types.Func); ok {
		return f.Type().(*types.Signature).Recv() != nil
	}
	return false
}

func fileName(fset *token.FileSet, pos token.Pos) string {
	return filepath.Base(fset.Position(pos).Filename)
}

// codeLines counts the lines of src that hold a token other than a comment:
// not blank, not only a comment. A raw string's lines all count.
func codeLines(src []byte) int {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0) // comments are skipped
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		first := file.Line(pos)
		last := first
		if tok == token.STRING || tok == token.CHAR {
			last = file.Line(pos + token.Pos(len(lit)) - 1)
		}
		for l := first; l <= last; l++ {
			lines[l] = true
		}
	}
	return len(lines)
}

// largestCycle returns the files of the graph's largest strongly connected
// component, sorted (Tarjan's algorithm). A file in no cycle is a component
// of one.
func largestCycle(graph map[string][]string) []string {
	nodes := make([]string, 0, len(graph))
	for n := range graph {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack, best []string
	next := 0
	var visit func(string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range graph[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > len(best) {
			sort.Strings(comp)
			best = comp
		}
	}
	for _, n := range nodes {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	return best
}

// print writes the table and returns how many limits are broken.
func print(w io.Writer, reports []report, verbose bool) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "package\tfiles\tcode lines\tlargest file\tcode lines\tlargest cycle\t")
	broken := 0
	var notes []string
	for _, r := range reports {
		mark := ""
		if len(r.cycle) > maxCycle {
			broken++
			mark = " !"
			notes = append(notes, fmt.Sprintf("%s: a file cycle of %d > %d: %s", r.path, len(r.cycle), maxCycle, strings.Join(r.cycle, " ")))
		}
		for _, f := range r.tooLarge {
			broken++
			notes = append(notes, fmt.Sprintf("%s: %s code lines > %d", r.path, f, maxFileLines))
		}
		if len(r.tooLarge) > 0 {
			mark += " !"
		}
		if r.typeError != nil {
			notes = append(notes, fmt.Sprintf("%s: type-checking: %v (the cycle may be short)", r.path, r.typeError))
		}
		if verbose && len(r.cycle) > 1 && len(r.cycle) <= maxCycle {
			notes = append(notes, fmt.Sprintf("%s: largest cycle: %s", r.path, strings.Join(r.cycle, " ")))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d%s\t\n", r.path, r.files, r.code, r.largest, r.largestN, len(r.cycle), mark)
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return broken
}

// printGraph writes one package's file-reference graph, a file and the files
// it references on each line, the largest cycle's files marked with a *.
func printGraph(w io.Writer, reports []report, dir string) {
	for _, r := range reports {
		if r.path != dir {
			continue
		}
		inCycle := map[string]bool{}
		if len(r.cycle) > 1 {
			for _, f := range r.cycle {
				inCycle[f] = true
			}
		}
		files := make([]string, 0, len(r.graph))
		for f := range r.graph {
			files = append(files, f)
		}
		sort.Strings(files)
		for _, f := range files {
			mark := " "
			if inCycle[f] {
				mark = "*"
			}
			fmt.Fprintf(w, "%s %s -> %s\n", mark, f, strings.Join(r.graph[f], " "))
		}
	}
}
