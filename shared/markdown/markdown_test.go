package markdown_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/remote-agents/remote-agents/localstack/benchrec"
	"github.com/remote-agents/remote-agents/shared/markdown"
)

func TestHTML(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     []string // in the output
		absent   []string // not in the output
	}{
		{name: "emphasis and code", in: "a **bold** and *em* and `x := 1`",
			want: []string{"<strong>bold</strong>", "<em>em</em>", "<code>x := 1</code>"}},
		{name: "line breaks stay", in: "one\ntwo\r\nthree\rfour\n\nnext",
			want: []string{"<p>one<br>\ntwo<br>\nthree<br>\nfour</p>\n<p>next</p>"}},
		{name: "lists", in: "- one\n- two\n\n3. three\n4. four",
			want: []string{"<ul>\n<li>one</li>\n<li>two</li>\n</ul>", `<ol start="3">`}},
		{name: "code block", in: "```go\nfmt.Println(\"<b>\")\n```",
			want: []string{`<pre><code class="language-go">fmt.Println(&#34;&lt;b&gt;&#34;)`}},
		{name: "table, strikethrough, task list", in: "| a | b |\n|:-|-:|\n| 1 | 2 |\n\n~~old~~\n\n- [x] done",
			want:   []string{`<th align="left">a</th>`, `<td align="right">2</td>`, "<del>old</del>", `<input checked="" disabled="" type="checkbox"`},
			absent: []string{"style="}},
		{name: "raw HTML is text", in: "<script>alert(1)</script>\n\nand <img src=x onerror=alert(1)> <b>b</b>",
			want:   []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&lt;b&gt;b&lt;/b&gt;"},
			absent: []string{"<script", "<img", "<b>"}},
		{name: "links", in: "[site](https://example.com/a?b=1) and https://example.org and [mail](mailto:a@example.com)",
			want: []string{`<a href="https://example.com/a?b=1" rel="nofollow noreferrer noopener" target="_blank">site</a>`,
				`<a href="https://example.org" rel="nofollow noreferrer noopener" target="_blank">`, `href="mailto:a@example.com"`}},
		{name: "unsafe and relative links lose their href", in: "[a](javascript:alert(1)) [b](JaVaScRiPt:alert(1)) [c](data:text/html,x) [d](vbscript:x) [e](/api/remote_agents) [f](//evil.example/x) [g](&#106;avascript:alert(1))",
			want:   []string{"a b c d e f g"},
			absent: []string{"<a", "javascript", "data:", "/api/"}},
		{name: "images become links", in: "![a chart](https://example.com/c.png) ![](https://example.com/d.png) ![x](javascript:alert(1))",
			want:   []string{`<a href="https://example.com/c.png" rel="nofollow noreferrer noopener" target="_blank">a chart</a>`, `>https://example.com/d.png</a>`},
			absent: []string{"<img", "javascript"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := markdown.HTML(c.in)
			safe(t, c.in, got)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, lacks %q", c.in, got, w)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(strings.ToLower(got), strings.ToLower(a)) {
					t.Errorf("HTML(%q) = %q, has %q", c.in, got, a)
				}
			}
		})
	}
}

// allowed is every element and attribute the output may have.
var allowed = map[string][]string{
	"p": nil, "br": nil, "hr": nil, "em": nil, "strong": nil, "del": nil, "code": {"class"}, "pre": nil, "blockquote": nil,
	"ul": nil, "ol": {"start"}, "li": nil, "h1": nil, "h2": nil, "h3": nil, "h4": nil, "h5": nil, "h6": nil,
	"table": nil, "thead": nil, "tbody": nil, "tr": nil, "th": {"align"}, "td": {"align"},
	"input": {"type", "checked", "disabled"}, "a": {"href", "rel", "target"},
}

// safe checks the output as a browser parses it: only allowed elements and
// attributes, links only to http, https and mailto URLs, checkboxes only.
func safe(t *testing.T, in, out string) {
	t.Helper()
	nodes, err := html.ParseFragment(strings.NewReader(out), &html.Node{Type: html.ElementNode, Data: "li", DataAtom: atom.Li})
	if err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs, ok := allowed[n.Data]
			if !ok {
				t.Errorf("HTML(%q) = %q: element %s", in, out, n.Data)
			}
			for _, a := range n.Attr {
				switch {
				case !slices.Contains(attrs, a.Key):
					t.Errorf("HTML(%q) = %q: attribute %s on %s", in, out, a.Key, n.Data)
				case a.Key == "href" && !safeURL(a.Val):
					t.Errorf("HTML(%q) = %q: href %q", in, out, a.Val)
				case a.Key == "type" && a.Val != "checkbox":
					t.Errorf("HTML(%q) = %q: input type %q", in, out, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	for _, n := range nodes {
		walk(n)
	}
}

func safeURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "mailto")
}

func FuzzHTML(f *testing.F) {
	for _, s := range []string{"**b** `c`", "<script>x</script>", "[a](javascript:x)", "![i](https://e.x/i.png)", "<a href=x onclick=y>z</a>", "| a |\n|-|\n| <img src=x> |", "- [ ] t\n- [x] u"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		safe(t, in, markdown.HTML(in))
	})
}

// Text nested deeper than MaxDepth, or longer than MaxBytes, is shown as the
// text it is (escaped, its line breaks kept), at the cost of its length, not
// rendered at the cost of its nesting; nesting within the bound, and deep
// indentation inside fenced code, render as Markdown.
func TestNestingIsBounded(t *testing.T) {
	t.Parallel()
	var indented strings.Builder
	for i := range 40 {
		indented.WriteString(strings.Repeat(" ", 2*i) + "- item\n")
	}
	for name, in := range map[string]string{
		"quotes":        strings.Repeat(">", 30000),
		"spaced quotes": strings.Repeat("> ", 15000) + "x",
		"bullets":       strings.Repeat("- ", 15000) + "x",
		"numbers":       strings.Repeat("1. ", 10000) + "x",
		"indentation":   indented.String(),
		"long":          strings.Repeat("word ", markdown.MaxBytes/5+1),
	} {
		out := markdown.HTML(in + "\n<b>")
		if strings.Contains(out, "<blockquote>") || strings.Contains(out, "<li>") || !strings.HasPrefix(out, "<p>") || !strings.Contains(out, "&lt;b&gt;") {
			t.Errorf("%s: rendered as Markdown, or not escaped: %.200s", name, out)
		}
	}
	within := strings.Repeat("> ", markdown.MaxDepth-1) + "deep enough"
	if out := markdown.HTML(within); strings.Count(out, "<blockquote>") != markdown.MaxDepth-1 {
		t.Errorf("nesting within the bound was not rendered: %s", out)
	}
	fenced := "```json\n" + strings.Repeat(" ", 80) + "\"deep\": 1\n```\n\n- item"
	if out := markdown.HTML(fenced); !strings.Contains(out, "<pre><code") || !strings.Contains(out, "<li>item</li>") {
		t.Errorf("indented fenced code made the text plain: %s", out)
	}
}

// BenchmarkDeepQuotes renders the message that took seconds before the
// nesting was bounded (30,000 '>'), and an ordinary reply of the same
// length.
func BenchmarkDeepQuotes(b *testing.B) {
	deep := strings.Repeat(">", 30000)
	reply := strings.Repeat("Some **bold** text, a `code span` and a [link](https://example.com).\n\n- one\n- two\n\n", 400)[:30000]
	rec := benchrec.New(b)
	for b.Loop() {
		began := time.Now()
		markdown.HTML(deep)
		rec.Add("30,000 >", time.Since(began))
		began = time.Now()
		markdown.HTML(reply)
		rec.Add("30 KB reply", time.Since(began))
	}
	rec.Done()
}
