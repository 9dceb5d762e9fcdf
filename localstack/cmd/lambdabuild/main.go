// Command lambdabuild builds Lambda functions (functions/<name>) for the
// provided.al2023 runtime and writes each function's deployment zip,
// reproducibly: the same source gives the same bytes, so that a deploy
// replaces only the functions whose code changed.
//
//	go run ./localstack/cmd/lambdabuild [-out dist] [-arch arm64] [name ...]
//
// With no names it builds every folder under functions/ with a main.go. For
// each function it writes <out>/<name>/bootstrap and <out>/<name>.zip. It
// runs one go build for all of them, from the module's root (the current
// directory, or -root). make build and benchreport build with it.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the module's root: the folder holding functions/")
	out := flag.String("out", "dist", "where <name>.zip and <name>/bootstrap go (relative to -root)")
	arch := flag.String("arch", "arm64", "the functions' architecture (GOARCH): arm64 as deployed, or the host's to run them here")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: lambdabuild [-root dir] [-out dir] [-arch arch] [function ...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	names := flag.Args()
	if len(names) == 0 {
		var err error
		if names, err = functions(*root); err != nil {
			log.Fatal(err)
		}
	}
	dir := *out
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(*root, dir)
	}
	if err := build(*root, *arch, dir, names, os.Stderr); err != nil {
		log.Fatal(err)
	}
}
