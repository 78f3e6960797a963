package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"reflect"
	"testing"
)

func TestCodeLinesCountNeitherBlanksNorComments(t *testing.T) {
	src := "// Package p says why.\npackage p\n\n/* a block\n   comment */\nvar s = `raw\n\nstring` // trailing\n\n\t// indented\nfunc f() {}\n"
	// package p; the three lines of the raw string; func f
	if got := codeLines([]byte(src)); got != 5 {
		t.Fatalf("codeLines = %d, want 5", got)
	}
}

func TestLargestCycleIsTheLargestStronglyConnectedComponent(t *testing.T) {
	graph := map[string][]string{
		"a.go": {"b.go"},
		"b.go": {"c.go"},
		"c.go": {"a.go", "d.go"},
		"d.go": {"e.go"},
		"e.go": {"d.go"},
		"f.go": nil,
	}
	want := []string{"a.go", "b.go", "c.go"}
	if got := largestCycle(graph); !reflect.DeepEqual(got, want) {
		t.Fatalf("largestCycle = %v, want %v", got, want)
	}
	if got := largestCycle(map[string][]string{"a.go": {"b.go"}, "b.go": nil}); len(got) != 1 {
		t.Fatalf("a graph without a cycle: largest %v, want one file", got)
	}
}

// The noun file references no verb file: methods declared in verb.go on a
// type of noun.go make verb.go reference noun.go, not the other way; a call of
// a method declared in another file is a reference to that file.
func TestFileGraphFollowsIdentifiersAndMethods(t *testing.T) {
	files := map[string]string{
		"noun.go":  "package p\ntype Engine struct{ n int }\nfunc (e *Engine) N() int { return e.n }\n",
		"verb.go":  "package p\nfunc (e *Engine) Start() int { return e.N() + helper() }\n",
		"help.go":  "package p\nfunc helper() int { var e Engine; return e.Stop() }\n",
		"stop.go":  "package p\nfunc (e *Engine) Stop() int { return 0 }\n",
		"alone.go": "package p\nconst unused = 1\n",
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	graph, err := fileGraph(fset, "p", parsed, importer.Default())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"noun.go":  nil,
		"verb.go":  {"help.go", "noun.go"},
		"help.go":  {"noun.go", "stop.go"},
		"stop.go":  {"noun.go"},
		"alone.go": nil,
	}
	if !reflect.DeepEqual(graph, want) {
		t.Fatalf("graph = %v, want %v", graph, want)
	}
	if got := largestCycle(graph); len(got) != 1 {
		t.Fatalf("largest cycle %v, want none", got)
	}
}
