package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// tableWriter prints aligned columns for humans.
type tableWriter struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer) *tableWriter {
	return &tableWriter{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// row writes one line; the first row is the header.
func (t *tableWriter) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *tableWriter) flush() error { return t.tw.Flush() }
