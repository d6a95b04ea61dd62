package faceshape

import "github.com/pollux-dev/pollux/pkg/state"

// HookWants reports whether the webhook a face's create asked for on job
// j takes an event of type typ: the create's filter (Replicate), the end
// only (fal), a change of the generation's state (Luma). A job without a
// face's webhook takes every event.
func HookWants(j *state.Job, typ string) bool {
	switch {
	case ReplicateHook(j):
		return ReplicateWants(j, typ)
	case FalHook(j):
		return FalWants(typ)
	case LumaHook(j):
		return LumaWants(typ)
	}
	return true
}
