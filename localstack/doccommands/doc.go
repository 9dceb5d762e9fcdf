// Package doccommands holds no code: its tests run the shell commands of
// README.md and docs/*.md against a dev server, as a reader pastes them.
// A block a test runs is marked <!-- run by TestX in localstack/doccommands -->
// on the line before it; the repository's tests (docs_test.go) fail when a
// command of the documentation is neither such a block's nor a make target.
package doccommands
