// Package tools groups the user's commands beyond the services: the
// pollux CLI (cli), the one-process stack of pollux dev and pollux serve
// (dev), the fleet benchmark (bench) and the schedule simulator
// (simulate). They may import every other part.
package tools
