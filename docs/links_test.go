// Package docs holds the operator documentation. Its only code is tests:
// this one keeps the links of the repository's Markdown honest (every
// relative link must name a file or folder that a clone of the repository
// has), and config_reference_test.go keeps config.md in step with the
// loader's schema.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// skipDirs are never walked, and never valid link targets: a clone does not
// have them (they are built or ignored) or they are not documentation.
var skipDirs = map[string]bool{".git": true, "bin": true, "data": true, "node_modules": true, "testdata": true}

// absentDirs are top-level folders a clone does not have: a link into them
// works only on the machine it was written on.
var absentDirs = map[string]bool{".git": true, "bin": true, "data": true, "node_modules": true}

// TestLinks checks every Markdown link and image of README.md, docs/ and
// every README.md in the repository (plugins/, examples/, sdk/ ...).
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root %s has no go.mod: %v", root, err)
	}
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	// A walk that lost its way would pass with nothing checked.
	if !slices.Contains(files, "README.md") || !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, "docs/") }) {
		t.Fatalf("the walk of %s found %v: README.md and docs/ are missing", root, files)
	}
	for _, rel := range files {
		t.Run(rel, func(t *testing.T) {
			problems, err := checkFile(root, rel)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s", p)
			}
		})
	}
}

// markdownFiles lists, relative to root with slashes, README.md, every
// .md file under docs/ and every README.md anywhere else, skipping skipDirs.
func markdownFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.Name() == "README.md" || (strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md")) {
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// problem is one bad link.
type problem struct {
	file   string // relative to the root, with slashes
	line   int
	target string
	why    string
}

func (p problem) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", p.file, p.line, p.target, p.why)
}

// checkFile reads root/rel and returns its bad links.
func checkFile(root, rel string) ([]problem, error) {
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	var out []problem
	for _, l := range extractLinks(string(src)) {
		if why := checkTarget(root, rel, l.target); why != "" {
			out = append(out, problem{file: rel, line: l.line, target: l.target, why: why})
		}
	}
	return out, nil
}

// link is one link or image destination and the line it is on (1-based).
type link struct {
	line   int
	target string
}

// extractLinks returns the destinations of the inline links and images
// ([text](dest), ![alt](dest)) and of the reference definitions
// ([label]: dest) of a Markdown document. Fenced code blocks and code spans
// are not Markdown, so links in them are ignored.
func extractLinks(src string) []link {
	text := mask(src)
	lineAt := func(off int) int { return strings.Count(src[:off], "\n") + 1 }
	var out []link
	for i := 0; ; {
		j := strings.Index(text[i:], "](")
		if j < 0 {
			break
		}
		close := i + j
		i = close + 2
		if !opens(text, close) {
			continue
		}
		dest, start, ok := destination(text, close+2)
		if !ok {
			continue
		}
		out = append(out, link{line: lineAt(start), target: dest})
	}
	off := 0
	for _, ln := range strings.SplitAfter(text, "\n") {
		if m := refDef.FindStringSubmatchIndex(ln); m != nil {
			dest := strings.TrimSuffix(strings.TrimPrefix(ln[m[2]:m[3]], "<"), ">")
			out = append(out, link{line: lineAt(off), target: dest})
		}
		off += len(ln)
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

// refDef is a reference definition, [label]: destination (a footnote,
// [^1]: text, is not one).
var refDef = regexp.MustCompile(`^ {0,3}\[[^\]^][^\]]*\]:[ \t]*(<[^>\n]*>|[^ \t\n]+)`)

// opens reports whether the "]" at close ends a link text: a "[" before it
// on the same paragraph, brackets balanced in between.
func opens(text string, close int) bool {
	depth := 0
	for k := close - 1; k >= 0; k-- {
		switch text[k] {
		case ']':
			depth++
		case '[':
			if depth == 0 {
				return true
			}
			depth--
		case '\n':
			if k > 0 && text[k-1] == '\n' { // a blank line ends the paragraph
				return false
			}
		}
	}
	return false
}

// destination reads a link destination at text[i:], just after "(":
// <anything but > and newlines>, or a run without spaces whose parentheses
// balance. It returns the destination and where it starts.
func destination(text string, i int) (dest string, start int, ok bool) {
	for i < len(text) && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n') {
		i++
	}
	if i < len(text) && text[i] == '<' {
		end := strings.IndexAny(text[i+1:], ">\n")
		if end < 0 || text[i+1+end] != '>' {
			return "", 0, false
		}
		return text[i+1 : i+1+end], i, true
	}
	depth := 0
	for k := i; k < len(text); k++ {
		switch c := text[k]; {
		case c == '\\' && k+1 < len(text):
			k++
		case c == '(':
			depth++
		case c == ')' && depth == 0:
			return text[i:k], i, true
		case c == ')':
			depth--
		case c == ' ' || c == '\t' || c == '\n':
			if depth != 0 {
				return "", 0, false
			}
			return text[i:k], i, true // a title may follow
		}
	}
	return "", 0, false
}

// mask blanks what is not Markdown text, keeping every offset and newline:
// fenced code blocks, code spans, and backslash-escaped brackets,
// parentheses and backticks.
func mask(src string) string {
	b := []byte(src)
	blank := func(from, to int) {
		for k := from; k < to; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	// Fenced code blocks: ``` or ~~~ (3 or more), at any indentation (a
	// fence in a list item is indented).
	off := 0
	fence := ""
	for _, ln := range strings.SplitAfter(src, "\n") {
		trimmed := strings.TrimLeft(ln, " \t")
		run := fenceRun(trimmed)
		switch {
		case fence == "" && run != "":
			fence = run
			blank(off, off+len(ln))
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			blank(off, off+len(ln))
		}
		off += len(ln)
	}
	// Backslash escapes and code spans, left to right: an escaped bracket,
	// parenthesis or backtick is text; a run of n backticks opens a code
	// span up to the next run of exactly n, within one paragraph (no
	// escapes inside).
	for k := 0; k < len(b); {
		if b[k] == '\\' && k+1 < len(b) && strings.IndexByte("[]()`", b[k+1]) >= 0 {
			b[k], b[k+1] = ' ', ' '
			k += 2
			continue
		}
		if b[k] != '`' {
			k++
			continue
		}
		n := 0
		for k+n < len(b) && b[k+n] == '`' {
			n++
		}
		end := -1
		for m := k + n; m < len(b); {
			if b[m] == '\n' && m+1 < len(b) && b[m+1] == '\n' {
				break
			}
			if b[m] != '`' {
				m++
				continue
			}
			r := 0
			for m+r < len(b) && b[m+r] == '`' {
				r++
			}
			if r == n {
				end = m + r
				break
			}
			m += r
		}
		if end < 0 {
			k += n
			continue
		}
		blank(k, end)
		k = end
	}
	return string(b)
}

// fenceRun returns the opening run of a code fence line ("```", "~~~~"),
// or "" when the line does not start one.
func fenceRun(s string) string {
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			if c == "`" && strings.Contains(s[n:], "`") { // an info string may not hold a backtick
				return ""
			}
			return s[:n]
		}
	}
	return ""
}

// scheme matches a URL scheme at the start of a destination.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkTarget says what is wrong with a link destination found in the file
// rel (relative to root, with slashes), or "" when it is good.
func checkTarget(root, rel, target string) string {
	if strings.Contains(strings.ToLower(target), "shared/") {
		return "it points into shared/, which is outside the repository: a clone does not have it"
	}
	if target == "" {
		return "the destination is empty"
	}
	if s := scheme.FindString(target); s != "" {
		switch strings.ToLower(s) {
		case "http:", "https:", "mailto:":
			return ""
		}
		return fmt.Sprintf("scheme %s: only http, https and mailto links may leave the repository", strings.TrimSuffix(s, ":"))
	}
	if strings.HasPrefix(target, "#") {
		return "" // an anchor in the same file
	}
	p, frag, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("bad percent-encoding: %v", err)
	}
	if strings.HasPrefix(p, "/") {
		return "an absolute path: write it relative to the file's folder"
	}
	// Resolve component by component, so that a path may not leave the
	// root even on its way back in (../../main/README.md works only in a
	// checkout of that name).
	parts := strings.Split(path.Dir(rel), "/")
	if parts[0] == "." {
		parts = nil
	}
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "it leaves the repository (too many ../)"
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	resolved := strings.Join(parts, "/")
	if len(parts) > 0 && absentDirs[parts[0]] {
		return fmt.Sprintf("%s is in %s/, which a clone does not have", resolved, parts[0])
	}
	if resolved == "" {
		resolved = "."
	}
	if why := exists(root, parts); why != "" {
		return fmt.Sprintf("%s (resolved to %s)", why, resolved)
	}
	if frag != "" && strings.HasSuffix(strings.ToLower(resolved), ".md") {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(resolved)))
		if err != nil {
			return err.Error()
		}
		if !slices.Contains(anchors(string(src)), strings.ToLower(frag)) {
			return fmt.Sprintf("%s has no heading or anchor #%s", resolved, frag)
		}
	}
	return ""
}

// exists checks that the path of parts exists under root with exactly this
// spelling (a case-insensitive disk would accept a link that GitHub and
// every Linux clone break).
func exists(root string, parts []string) string {
	dir := root
	for i, c := range parts {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Sprintf("%s is not a folder", strings.Join(parts[:i], "/"))
		}
		found := ""
		for _, e := range entries {
			if e.Name() == c {
				found = c
				break
			}
			if strings.EqualFold(e.Name(), c) {
				found = e.Name()
			}
		}
		switch {
		case found == "":
			return "no such file or folder"
		case found != c:
			return fmt.Sprintf("no such file or folder; the disk has %s (the case differs)", found)
		}
		dir = filepath.Join(dir, c)
	}
	return ""
}

// anchors lists the fragments a Markdown file answers to, as GitHub makes
// them: each heading lowercased, punctuation dropped, spaces made hyphens,
// a repeated one suffixed -1, -2...; and the id or name of HTML anchors.
func anchors(src string) []string {
	text := mask(src)
	lines := strings.Split(text, "\n")
	seen := map[string]int{}
	var out []string
	add := func(heading string) {
		s := slug(heading)
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	orig := strings.Split(src, "\n")
	for i, ln := range lines {
		t := strings.TrimLeft(ln, " ")
		switch {
		case len(ln)-len(t) <= 3 && atx.MatchString(t):
			h := strings.TrimLeft(orig[i][len(ln)-len(t):], "#")
			h = strings.TrimRight(strings.TrimSpace(h), "#")
			add(h)
		case i > 0 && strings.TrimSpace(lines[i-1]) != "" && setext.MatchString(ln) && !atx.MatchString(strings.TrimSpace(lines[i-1])):
			add(strings.TrimSpace(orig[i-1]))
		}
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(src, -1) {
		out = append(out, strings.ToLower(m[1]))
	}
	return out
}

var (
	atx        = regexp.MustCompile(`^#{1,6}([ \t]|$)`)
	setext     = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestExtractLinks: what counts as a link, and on which line.
func TestExtractLinks(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []link
	}{
		{"inline", "see [the API](api.md) now", []link{{1, "api.md"}}},
		{"image", "![diagram](img/a.png)", []link{{1, "img/a.png"}}},
		{"title", `[a](b.md "the title")`, []link{{1, "b.md"}}},
		{"angle brackets", "[a](<my file.md>)", []link{{1, "my file.md"}}},
		{"fragment kept", "[a](b.md#part)", []link{{1, "b.md#part"}}},
		{"balanced parentheses", "[a](b_(1).md)", []link{{1, "b_(1).md"}}},
		{"line numbers", "one\n\ntwo [a](x.md)\nthree [b](y.md)", []link{{3, "x.md"}, {4, "y.md"}}},
		{"text over two lines", "[the\nagent](z.md)", []link{{2, "z.md"}}},
		{"nested image in link", "[![b](i.png)](l.md)", []link{{1, "i.png"}, {1, "l.md"}}},
		{"reference definition", "[x][r]\n\n[r]: ref.md \"t\"", []link{{3, "ref.md"}}},
		{"footnote is not a definition", "[^1]: a note", nil},
		{"code span", "use `[a](nope.md)` here", nil},
		{"double code span", "use ``x ` [a](nope.md)`` here", nil},
		{"fenced code", "```go\nm[k](v)\n```\n[a](yes.md)", []link{{4, "yes.md"}}},
		{"tilde fence", "~~~\n[a](nope.md)\n~~~", nil},
		{"indented fence", "- item\n\n    ```\n    [a](nope.md)\n    ```", nil},
		{"escaped bracket", `\[a\](nope.md)`, nil},
		{"no text bracket", "a](nope.md)", nil},
		{"blank line between", "[a\n\nb](nope.md)", nil},
		{"empty", "[a]()", []link{{1, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extractLinks(tt.src)
			if !slices.Equal(got, tt.want) {
				t.Errorf("extractLinks(%q) = %v, want %v", tt.src, got, tt.want)
			}
		})
	}
}

// TestCheckTarget resolves links in a small repository in a temp dir.
func TestCheckTarget(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n")
	write("docs/api.md", "# The API\n\n## Errors (the envelope)\n\n## Errors (the envelope)\n\nSetext heading\n---\n\n```\n# not a heading\n```\n<a id=\"custom\"></a>\n")
	write("docs/img/a.png", "")
	write("docs/my file.md", "")
	write("plugins/node/README.md", "")
	write("bin/vigil", "")
	tests := []struct {
		from, target string
		bad          string // a part of the complaint; "" when the link is good
	}{
		{"docs/api.md", "../README.md", ""},
		{"docs/api.md", "img/a.png", ""},
		{"docs/api.md", "./img/../img/a.png", ""},
		{"docs/api.md", "my%20file.md", ""},
		{"docs/api.md", "../plugins/node/", ""},
		{"docs/api.md", "..", ""},
		{"README.md", "docs/api.md#the-api", ""},
		{"README.md", "docs/api.md#errors-the-envelope-1", ""},
		{"README.md", "docs/api.md#setext-heading", ""},
		{"README.md", "docs/api.md#custom", ""},
		{"README.md", "docs/api.md?plain=1", ""},
		{"README.md", "#anything", ""},
		{"README.md", "https://example.com/x", ""},
		{"README.md", "http://example.com/x", ""},
		{"README.md", "mailto:ops@example.com", ""},
		{"README.md", "docs/nope.md", "no such file"},
		{"docs/api.md", "nope.md#x", "no such file"},
		{"README.md", "docs/API.md", "the case differs"},
		{"README.md", "docs/api.md/x", "not a folder"},
		{"README.md", "docs/api.md#not-a-heading", "no heading or anchor"},
		{"README.md", "docs/api.md#errors-the-envelope-2", "no heading or anchor"},
		{"README.md", "../README.md", "leaves the repository"},
		{"docs/api.md", "../../x/README.md", "leaves the repository"},
		{"docs/api.md", "../../" + filepath.Base(root) + "/README.md", "leaves the repository"},
		{"README.md", "/docs/api.md", "absolute path"},
		{"README.md", "bin/vigil", "a clone does not have"},
		{"docs/api.md", "../../shared/spec/decisions.md", "shared/"},
		{"README.md", "https://example.com/shared/x", "shared/"},
		{"README.md", "ftp://example.com/x", "scheme ftp"},
		{"README.md", "", "empty"},
		{"README.md", "docs/%zz", "percent-encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.from+" -> "+tt.target, func(t *testing.T) {
			got := checkTarget(root, tt.from, tt.target)
			switch {
			case tt.bad == "" && got != "":
				t.Errorf("a good link was refused: %s", got)
			case tt.bad != "" && got == "":
				t.Errorf("a bad link passed; want a complaint about %q", tt.bad)
			case !strings.Contains(got, tt.bad):
				t.Errorf("complaint %q does not say %q", got, tt.bad)
			}
		})
	}

	// The whole path that TestLinks takes: a file with a bad link fails,
	// naming file:line and the target.
	write("docs/bad.md", "# Bad\n\nfine [a](api.md)\n\nbroken [b](gone.md) and `[c](code.md)`\n")
	problems, err := checkFile(root, "docs/bad.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0].String(), `docs/bad.md:5: link "gone.md": no such file`) {
		t.Errorf("checkFile found %v, want one problem at docs/bad.md:5 about gone.md", problems)
	}
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md", "docs/api.md", "docs/bad.md", "docs/my file.md", "plugins/node/README.md"}
	if !slices.Equal(files, want) {
		t.Errorf("markdownFiles = %v, want %v", files, want)
	}
}
