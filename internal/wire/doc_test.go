package wire

import (
	"go/doc/comment"
	"go/parser"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProtocolHistory reads the protocol history in doc.go's package comment
// (the list that follows the paragraph starting "Protocol history") and proves:
// it is there and is a list; its entries are numbered 1, 2, …, N in order, with
// no gap and no repeat; each entry says something after its number; and N is
// Revision. So a wire change that adds an entry without raising Revision, or
// raises Revision without an entry, fails here.
func TestProtocolHistory(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil {
		t.Fatal("doc.go has no package comment")
	}
	var p comment.Parser
	blocks := p.Parse(f.Doc.Text()).Content
	var list *comment.List
	for i, b := range blocks {
		if para, ok := b.(*comment.Paragraph); ok && strings.HasPrefix(plain(para.Text), "Protocol history") {
			if i+1 >= len(blocks) {
				t.Fatal(`nothing follows the "Protocol history" paragraph`)
			}
			if list, ok = blocks[i+1].(*comment.List); !ok {
				t.Fatalf(`the block after the "Protocol history" paragraph is a %T, not a list`, blocks[i+1])
			}
			break
		}
	}
	if list == nil {
		t.Fatal(`doc.go's package comment has no paragraph starting "Protocol history"`)
	}
	entry := regexp.MustCompile(`^(\d+): *(.*)$`)
	for i, item := range list.Items {
		var text strings.Builder
		for _, b := range item.Content {
			if para, ok := b.(*comment.Paragraph); ok {
				text.WriteString(plain(para.Text))
				text.WriteString(" ")
			}
		}
		s := strings.TrimSpace(strings.Join(strings.Fields(text.String()), " "))
		m := entry.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("history entry %d does not start with its number and a colon: %q", i+1, s)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Fatalf("history entry %d is numbered %d (a gap, a repeat or out of order): %q", i+1, n, s)
		}
		if strings.TrimSpace(m[2]) == "" {
			t.Errorf("history entry %d says nothing", n)
		}
	}
	if got := len(list.Items); got != Revision {
		t.Errorf("the history has %d entries but Revision = %d: they must agree", got, Revision)
	}
}

// plain is the text of a doc comment span, markup dropped.
func plain(txt []comment.Text) string {
	var b strings.Builder
	for _, x := range txt {
		switch x := x.(type) {
		case comment.Plain:
			b.WriteString(string(x))
		case comment.Italic:
			b.WriteString(string(x))
		case *comment.Link:
			b.WriteString(plain(x.Text))
		case *comment.DocLink:
			b.WriteString(plain(x.Text))
		}
	}
	return b.String()
}
