package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/tools/dev"
	"github.com/pollux-dev/pollux/pkg/state"
)

// newFace is one of the faces of issue 41 as the bench drives it: its
// create (path and body of job i), the id in the create's answer, its
// status path, and the headers its SDK sends on every request.
type newFace struct {
	name, create string
	body         func(i int) string
	id           func(answer map[string]any) string
	status       func(id string) string
	header       http.Header
}

// newFaces are the genai, Runway and Luma faces.
var newFaces = []newFace{
	{name: "genai", create: "/v1beta1/publishers/bench/models/video:predictLongRunning",
		body: func(i int) string { return fmt.Sprintf(`{"instances":[{"prompt":"bench %d"}]}`, i) },
		id: func(a map[string]any) string {
			name, _ := a["name"].(string)
			return name[strings.LastIndexByte(name, '/')+1:]
		},
		status: func(id string) string { return "/v1beta/models/video/operations/" + id }},
	{name: "runway", create: "/v1/image_to_video", header: http.Header{"X-Runway-Version": {"2024-11-06"}},
		body: func(i int) string {
			return fmt.Sprintf(`{"model":"gen4_turbo","promptImage":"https://example.com/%d.png"}`, i)
		},
		id:     func(a map[string]any) string { id, _ := a["id"].(string); return id },
		status: func(id string) string { return "/v1/tasks/" + id }},
	{name: "luma", create: "/generations/video",
		body:   func(i int) string { return fmt.Sprintf(`{"model":"bench/video","prompt":"bench %d"}`, i) },
		id:     func(a map[string]any) string { id, _ := a["id"].(string); return id },
		status: func(id string) string { return "/generations/" + id }},
}

// headerTransport sets h on every request it carries.
type headerTransport struct {
	base http.RoundTripper
	h    http.Header
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// benchNewFaces measures each new face's status answer at facesRate, next
// to the front door's own: n jobs created through the face, then read
// through GET /v1/jobs/{id} and through the face, each in an open loop.
func (r *runner) benchNewFaces(ctx context.Context, c *http.Client, root string, n int) error {
	for _, f := range newFaces {
		base := root + "/" + f.name + "/" + dev.RouteName
		fc := &http.Client{Transport: headerTransport{c.Transport, f.header}, Timeout: c.Timeout}
		r.progress("%d jobs through the %s face", n, f.name)
		ids := make([]string, n)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for i := range n {
			g.Go(func() error {
				req, err := http.NewRequestWithContext(gctx, http.MethodPost, base+f.create, strings.NewReader(f.body(i)))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := fc.Do(req)
				if err != nil {
					return err
				}
				defer func() { _ = resp.Body.Close() }()
				var a map[string]any
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode/100 != 2 || json.Unmarshal(b, &a) != nil || f.id(a) == "" {
					return fmt.Errorf("create through the %s face: %d %s", f.name, resp.StatusCode, b)
				}
				ids[i] = f.id(a)
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if err := jobsEnded(ctx, c, root, ids); err != nil { // as the Replicate face's are before theirs
			return err
		}
		// The reference is measured just before, on the same jobs, so that
		// what else the machine runs weighs on both alike.
		r.progress("GET /v1/jobs/{id} of the %s face's jobs, then its status, at %d/s for %s each", f.name, facesRate, r.cfg.Window)
		pl, err := openLoop(ctx, c, func(i int) string { return root + "/v1/jobs/" + ids[i%len(ids)] }, facesRate, r.cfg.Window)
		if err != nil {
			return err
		}
		fl, err := openLoop(ctx, fc, func(i int) string { return base + f.status(ids[i%len(ids)]) }, facesRate, r.cfg.Window)
		if err != nil {
			return err
		}
		r.report.add(Row{Group: "faces", Name: fmt.Sprintf("status answer p99 through the %s face (ms)", f.name), Value: fl.p99, Unit: "ms", Reference: pl.p99,
			Note: fmt.Sprintf("open loop at %d/s for %s; reference: GET /v1/jobs/{id} of the same jobs just before, p50 %.2f ms; face p50 %.2f ms; %.0f answers/s served, %d errors",
				facesRate, r.cfg.Window, pl.p50, fl.p50, fl.rate, fl.errors)}).
			atMost(pl.p99+5, "< plain + 5 ms")
	}
	return nil
}

// jobsEnded waits until every job of ids has ended, reading the front
// door's GET /v1/jobs/{id}.
func jobsEnded(ctx context.Context, c *http.Client, root string, ids []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, id := range ids {
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/v1/jobs/"+id, nil)
			if err != nil {
				return err
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			var j state.Job
			err = json.NewDecoder(resp.Body).Decode(&j)
			_ = resp.Body.Close()
			if err == nil && j.State.Terminal() {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("job %s has not ended: %w", id, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
