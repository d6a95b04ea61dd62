package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Row is one figure of the report.
type Row struct {
	// Group is the part of the bench the figure comes from.
	Group string `json:"group"`
	// Name says what was measured.
	Name string `json:"name"`
	// Value is the figure, in Unit.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Reference is the engine's own figure measured in the same run on
	// the same server (0: none), and Ratio is Value/Reference.
	Reference float64 `json:"reference,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// Target is the figure the design aims at, and Met whether this run
	// reached it (nil: no target).
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
	// Note qualifies the figure.
	Note string `json:"note,omitempty"`
}

// Report is one run's figures.
type Report struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Machine  string    `json:"machine"`
	Rows     []Row     `json:"rows"`
}

func (r *Report) add(row Row) *Row {
	if row.Reference > 0 {
		row.Ratio = row.Value / row.Reference
	}
	r.Rows = append(r.Rows, row)
	return &r.Rows[len(r.Rows)-1]
}

// atLeast sets a "≥ want" target on the row's value (or ratio, when ratio
// is true).
func (row *Row) atLeast(want float64, ratio bool, label string) *Row {
	v := row.Value
	if ratio {
		v = row.Ratio
	}
	met := v >= want
	row.Target, row.Met = label, &met
	return row
}

// atMost sets a "≤ want" target on the row's value.
func (row *Row) atMost(want float64, label string) *Row {
	met := row.Value <= want
	row.Target, row.Met = label, &met
	return row
}

// Print writes the report as a Markdown table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "Pollux bench, %s, %s (took %s)\n\n", r.Started.UTC().Format(time.RFC3339), r.Machine, r.Duration)
	fmt.Fprintln(w, "| group | figure | value | reference (raw JetStream, same run) | ratio | target |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|")
	for _, row := range r.Rows {
		ref, ratio := "", ""
		if row.Reference > 0 {
			ref = format(row.Reference, row.Unit)
			ratio = strconv.FormatFloat(row.Ratio, 'f', 2, 64)
		}
		target := row.Target
		if row.Met != nil {
			target += map[bool]string{true: " ✓", false: " ✗"}[*row.Met]
		}
		name := row.Name
		if row.Note != "" {
			name += " (" + row.Note + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row.Group, name, format(row.Value, row.Unit), ref, ratio, strings.TrimSpace(target))
	}
}

func format(v float64, unit string) string {
	var s string
	switch {
	case v >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}
