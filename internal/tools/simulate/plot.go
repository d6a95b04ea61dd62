package simulate

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// The plot: one panel a model, two a row, log–log axes of mean detection
// delay (x) against polls per job (y), fixed so panels compare.
const (
	panelW, panelH = 420, 300
	marginL        = 52 // room for the y labels
	marginR        = 12
	marginT        = 28 // room for the title
	marginB        = 40 // room for the x labels
	columns        = 2
	legendH        = 64
	xMin, xMax     = 1.0, 100.0 // seconds
	yMin, yMax     = 1.0, 100.0 // polls per job
	// yLow is the bottom of a panel whose frontier goes below yMin: a
	// model whose jobs expect webhooks, most of them resolved without a
	// poll.
	yLow = 0.1
)

// palette colours the strategies in the order they appear; the frontier is
// black.
var palette = []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

// WritePlot draws, for every model, each strategy's polls per job against
// its mean detection delay across its knob (the default setting a larger
// dot) and the optimal frontier, as SVG. It needs results run with
// Config.Sweep.
func WritePlot(w io.Writer, results ...*Result) error {
	var sweeps [][]Sweep // by model
	colour := map[string]string{"frontier": "#000"}
	var names []string // legend order
	for _, res := range results {
		for _, md := range res.Models {
			var ms []Sweep
			for _, sw := range res.Sweeps {
				if sw.Model != md.Name {
					continue
				}
				ms = append(ms, sw)
				if _, ok := colour[sw.Strategy]; !ok {
					colour[sw.Strategy] = palette[len(names)%len(palette)]
					names = append(names, sw.Strategy)
				}
			}
			if len(ms) > 0 {
				sweeps = append(sweeps, ms)
			}
		}
	}
	if len(sweeps) == 0 {
		return fmt.Errorf("plot: no sweeps; run with Config.Sweep")
	}
	names = append(names, "frontier")
	defaults := map[string]float64{}
	for _, res := range results {
		for _, sc := range res.Scores {
			defaults[sc.Strategy] = sc.Knob
		}
	}

	rows := (len(sweeps) + columns - 1) / columns
	width, height := columns*panelW, legendH+rows*panelH
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#fff"/>` + "\n")
	for i, name := range names {
		x := 12 + i*(width-24)/len(names)
		p(`<line x1="%d" y1="20" x2="%d" y2="20" stroke="%s" stroke-width="%s"/>`, x, x+18, colour[name], strokeWidth(name))
		p(`<text x="%d" y="24">%s</text>`+"\n", x+22, html.EscapeString(name))
	}
	p(`<text x="12" y="40" fill="#555">Each strategy across its knob (the poll cost, else a factor on its delays), the large dot at its default.</text>` + "\n")
	p(`<text x="12" y="54" fill="#555">Frontier: the optimal plans of the true distribution, within the same MinDelay and MaxDelay.</text>` + "\n")
	for i, ms := range sweeps {
		ox, oy := (i%columns)*panelW, legendH+(i/columns)*panelH
		panel(p, ox, oy, i, ms, colour, defaults)
	}
	p("</svg>\n")
	return bw.Flush()
}

func strokeWidth(name string) string {
	if name == "frontier" {
		return "2.5"
	}
	return "1.5"
}

// panel draws one model's sweeps with its top-left corner at ox, oy.
func panel(p func(string, ...any), ox, oy, id int, ms []Sweep, colour map[string]string, defaults map[string]float64) {
	x0, y0 := float64(ox+marginL), float64(oy+marginT)
	pw, ph := float64(panelW-marginL-marginR), float64(panelH-marginT-marginB)
	sx := func(v float64) float64 { return x0 + pw*math.Log(v/xMin)/math.Log(xMax/xMin) }
	lo := yMin
	for _, sw := range ms {
		for _, pt := range sw.Points {
			if sw.Strategy == "frontier" && pt.Polls < yMin {
				lo = yLow
			}
		}
	}
	sy := func(v float64) float64 { return y0 + ph - ph*math.Log(v/lo)/math.Log(yMax/lo) }

	p(`<text x="%g" y="%g" font-weight="bold">%s</text>`+"\n", x0, y0-8, html.EscapeString(ms[0].Model))
	p(`<clipPath id="c%d"><rect x="%g" y="%g" width="%g" height="%g"/></clipPath>`+"\n", id, x0, y0, pw, ph)
	p(`<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#888"/>`+"\n", x0, y0, pw, ph)
	for _, v := range ticks(xMin, xMax) {
		x := sx(v)
		p(`<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#eee"/>`, x, y0, x, y0+ph)
		p(`<text x="%.1f" y="%g" text-anchor="middle">%s</text>`, x, y0+ph+14, num(v))
	}
	for _, v := range ticks(lo, yMax) {
		y := sy(v)
		p(`<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/>`, x0, y, x0+pw, y)
		p(`<text x="%g" y="%.1f" text-anchor="end">%s</text>`, x0-4, y+4, num(v))
	}
	p("\n")
	p(`<text x="%g" y="%g" text-anchor="middle">mean detection delay (s)</text>`, x0+pw/2, y0+ph+32)
	p(`<text transform="translate(%g %g) rotate(-90)" text-anchor="middle">polls per job</text>`+"\n", x0-36, y0+ph/2)

	p(`<g clip-path="url(#c%d)" fill="none">`+"\n", id)
	for _, sw := range ms {
		if len(sw.Points) == 0 {
			continue
		}
		p(`<polyline stroke="%s" stroke-width="%s" points="`, colour[sw.Strategy], strokeWidth(sw.Strategy))
		for _, pt := range sw.Points {
			p("%.1f,%.1f ", sx(pt.MeanDelayS), sy(pt.Polls))
		}
		p(`"/>` + "\n")
		if sw.Strategy == "frontier" {
			continue
		}
		for _, pt := range sw.Points {
			r := 2.0
			if pt.Knob == defaults[sw.Strategy] {
				r = 4.5
			}
			p(`<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`, sx(pt.MeanDelayS), sy(pt.Polls), r, colour[sw.Strategy])
		}
		p("\n")
	}
	p("</g>\n")
}

// ticks are the grid lines 1, 2, 5 × 10ⁿ of a log axis within [lo, hi].
func ticks(lo, hi float64) []float64 {
	var ts []float64
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * d; v >= lo*0.999 && v <= hi*1.001 {
				ts = append(ts, v)
			}
		}
	}
	return ts
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
