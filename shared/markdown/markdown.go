// Package markdown renders the agent's Markdown to HTML that is safe to put in
// a page: CommonMark and GitHub's extensions (tables, strikethrough, task
// lists, bare links) by goldmark, line breaks kept, raw HTML shown as text,
// then sanitised by bluemonday to an allow list of elements and attributes.
// Links keep only
// http, https and mailto URLs, open in a new tab with rel="nofollow noopener
// noreferrer"; images become links to them (the embed view's CSP loads no
// image from another origin). No inline style survives: the output fits a page
// whose CSP allows no inline style.
package markdown

import (
	"bytes"
	stdhtml "html"
	"regexp"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

var (
	md = goldmark.New(
		goldmark.WithExtensions(
			extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
			extension.Strikethrough, extension.TaskList, extension.Linkify,
		),
		goldmark.WithParser(withoutRawHTML()),
		// Not html.WithUnsafe: dangerous URLs are emptied. A line break stays
		// one, as in a chat (and GitHub's comments), not a space.
		goldmark.WithRendererOptions(html.WithHardWraps(), renderer.WithNodeRenderers(util.Prioritized(imageLinks{}, 100))),
	)
	policy   = newPolicy()
	lineEnds = strings.NewReplacer("\r\n", "\n", "\r", "\n")
)

// MaxDepth bounds how deep text may nest block quotes and lists (by their
// markers and by indentation): deeper, it is shown as the text it is, not
// rendered, since the parser's and the sanitiser's work grows with the
// nesting far faster than with the length (30,000 '>' took seconds).
const MaxDepth = 16

// MaxBytes bounds the text rendered as Markdown; longer text is shown as
// the text it is.
const MaxBytes = 64 * 1024

// HTML renders text, Markdown, as sanitised HTML. Text that cannot be rendered
// (never seen: goldmark renders any input), that is longer than MaxBytes or
// nested deeper than MaxDepth comes back as escaped text, its line breaks
// kept.
func HTML(text string) string {
	// CommonMark's line endings are LF, CRLF and CR; goldmark reads a lone CR
	// as none.
	text = lineEnds.Replace(text)
	if len(text) > MaxBytes || tooDeep(text) {
		return plain(text)
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(text), &buf); err != nil {
		return plain(text)
	}
	return policy.Sanitize(buf.String())
}

// plain is text as one paragraph of escaped text, its line breaks kept.
func plain(text string) string {
	return "<p>" + strings.ReplaceAll(stdhtml.EscapeString(text), "\n", "<br>\n") + "</p>"
}

// tooDeep reports whether a line of text, outside fenced code, could nest
// containers deeper than MaxDepth: each block quote or list marker it
// starts with counts one, and every two columns of indentation before and
// between them one more (a nested list item is indented by two or more).
func tooDeep(text string) bool {
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if len(line)-len(trimmed) < 4 {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				continue
			}
		}
		if containerDepth(line) > MaxDepth {
			return true
		}
	}
	return false
}

// fenceOf is the code fence line opens (``` or ~~~, or longer), or "".
func fenceOf(line string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(line) && line[n] == c {
			n++
		}
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// containerDepth is how deep line could nest containers: its markers at
// its start ('>', a bullet or an ordered list number followed by a space)
// and every two columns of indentation among them (the space that ends a
// marker is the marker's).
func containerDepth(line string) int {
	depth, cols, i := 0, 0, 0
	for i < len(line) {
		switch c := line[i]; {
		case c == ' ':
			cols++
			i++
		case c == '\t':
			cols += 4
			i++
		case c == '>':
			depth++
			i = afterMarker(line, i+1)
		case (c == '-' || c == '+' || c == '*') && i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t'):
			depth++
			i = afterMarker(line, i+1)
		case c >= '0' && c <= '9':
			j := i
			for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j+1 < len(line) && (line[j] == '.' || line[j] == ')') && (line[j+1] == ' ' || line[j+1] == '\t') {
				depth++
				i = afterMarker(line, j+1)
				continue
			}
			return depth + cols/2
		default:
			return depth + cols/2
		}
	}
	return depth + cols/2
}

// withoutRawHTML is goldmark's default parser without its HTML block and raw
// HTML parsers: HTML in the agent's text is shown as the text it is, not
// dropped (nor rendered).
func withoutRawHTML() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(
			util.Prioritized(parser.NewSetextHeadingParser(), 100),
			util.Prioritized(parser.NewThematicBreakParser(), 200),
			util.Prioritized(parser.NewListParser(), 300),
			util.Prioritized(parser.NewListItemParser(), 400),
			util.Prioritized(parser.NewCodeBlockParser(), 500),
			util.Prioritized(parser.NewATXHeadingParser(), 600),
			util.Prioritized(parser.NewFencedCodeBlockParser(), 700),
			util.Prioritized(parser.NewBlockquoteParser(), 800),
			util.Prioritized(parser.NewParagraphParser(), 1000),
		),
		parser.WithInlineParsers(
			util.Prioritized(parser.NewCodeSpanParser(), 100),
			util.Prioritized(parser.NewLinkParser(), 200),
			util.Prioritized(parser.NewAutoLinkParser(), 300),
			util.Prioritized(parser.NewEmphasisParser(), 500),
		),
		parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	)
}

func newPolicy() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote",
		"ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td")
	p.AllowAttrs("start").Matching(bluemonday.Integer).OnElements("ol")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|center|right)$`)).OnElements("th", "td")
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^language-[A-Za-z0-9_+#.-]{1,40}$`)).OnElements("code")
	// Task lists: a disabled checkbox.
	p.AllowAttrs("type").Matching(regexp.MustCompile(`^checkbox$`)).OnElements("input")
	p.AllowAttrs("checked", "disabled").OnElements("input")
	p.AllowAttrs("href").OnElements("a")
	p.AllowURLSchemes("http", "https", "mailto")
	p.AllowRelativeURLs(false)
	p.RequireParseableURLs(true)
	p.RequireNoFollowOnLinks(true)
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true) // and rel="noopener"
	return p
}

// imageLinks renders an image as a link to it, its alt text the link's text.
type imageLinks struct{}

// RegisterFuncs implements renderer.NodeRenderer.
func (imageLinks) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindImage, func(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		n := node.(*ast.Image)
		dest := util.URLEscape(n.Destination, true)
		if entering {
			_, _ = w.WriteString(`<a href="`)
			if !html.IsDangerousURL(dest) {
				_, _ = w.Write(util.EscapeHTML(dest))
			}
			_, _ = w.WriteString(`">`)
			if !n.HasChildren() {
				_, _ = w.Write(util.EscapeHTML(n.Destination))
			}
			return ast.WalkContinue, nil
		}
		_, _ = w.WriteString("</a>")
		return ast.WalkContinue, nil
	})
}

// afterMarker is where line goes on after a container marker that ends at
// i: past the one space that belongs to the marker.
func afterMarker(line string, i int) int {
	if i < len(line) && line[i] == ' ' {
		return i + 1
	}
	return i
}
