package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pollux-dev/pollux/internal/core/spend"
)

// spendDays is how many days `pollux stats` shows the apps' spend of.
const spendDays = 7

// printSpend prints the apps' spend by day, route and model, as `pollux
// stats` shows it (nothing when no route prices its jobs).
func printSpend(w io.Writer, apps []spend.AppSpend) {
	if len(apps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nspend, the last %d days (UTC; a day's total counts the estimates of jobs under way)\n", spendDays)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  app\tday\tspent\troute\tmodel\tcost\tjobs")
	for _, a := range apps {
		name := a.App
		if name == "" {
			name = "(none)"
		}
		for _, d := range a.Days {
			fmt.Fprintf(tw, "  %s\t%s\t%.4g\t\t\t\t\n", name, d.Date, d.Spent)
			for _, l := range d.By {
				fmt.Fprintf(tw, "  \t\t\t%s\t%s\t%.4g\t%d\n", l.Route, l.Model, l.Cost, l.Jobs)
			}
		}
		if a.Budget.Day > 0 || a.Budget.Month > 0 {
			fmt.Fprintf(tw, "  %s\tbudget\tday %.4g, month %.4g (this month %.4g)\t\t\t\t\n", name, a.Budget.Day, a.Budget.Month, a.Month)
		}
	}
	_ = tw.Flush()
}
