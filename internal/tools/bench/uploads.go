package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/dev"
)

// The uploads section: input files through a face (Replicate's POST
// /v1/files, as its SDK uploads a Buffer) into the inputs bucket, on the
// whole stack in-process as pollux serve runs it.
//
//   - throughput: uploadRuns files of uploadBytes one after another
//     through the face, next to the same bytes put straight into an
//     Object Store bucket of the same server (target ≥ 0.5 of it);
//   - memory: uploadConcurrent uploads of uploadBytes at once, the
//     process's peak RSS over its RSS before (target < 64 MB: the bytes
//     stream into the bucket, never held whole). The process holds the
//     clients too, which stream their bodies from a 32 KiB buffer.
const (
	uploadBytes      = 50 << 20
	uploadRuns       = 4
	uploadConcurrent = 10
)

func (r *runner) uploads(ctx context.Context) error {
	return r.withStack(ctx, dev.StackConfig{
		Route: config.Route{Faces: []string{"replicate", "fal"}}, NoWebhooks: true, Logger: zerolog.New(os.Stderr).Level(zerolog.ErrorLevel),
	}, func(st *dev.Stack, js jetstream.JetStream) error {
		files := st.HTTPURL + "/replicate/" + dev.RouteName + "/v1/files"
		client := &http.Client{Timeout: 5 * time.Minute}

		r.progress("%d uploads of %d MB through the face", uploadRuns, uploadBytes>>20)
		start := time.Now()
		var ids []string
		for range uploadRuns {
			id, err := faceUpload(ctx, client, files, uploadBytes)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		face := float64(uploadRuns*uploadBytes) / (1 << 20) / time.Since(start).Seconds()
		if err := deleteFiles(ctx, client, files, ids); err != nil {
			return err
		}

		r.progress("%d uploads of %d MB through fal's upload URL (a plain PUT)", uploadRuns, uploadBytes>>20)
		start = time.Now()
		for range uploadRuns {
			if err := falUpload(ctx, client, st.HTTPURL+"/fal/"+dev.RouteName+"/", uploadBytes); err != nil {
				return err
			}
		}
		falRate := float64(uploadRuns*uploadBytes) / (1 << 20) / time.Since(start).Seconds()

		r.progress("%d puts of %d MB straight into an Object Store bucket", uploadRuns, uploadBytes>>20)
		obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "bench-uploads", Storage: jetstream.FileStorage})
		if err != nil {
			return err
		}
		start = time.Now()
		for i := range uploadRuns {
			if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: strconv.Itoa(i)}, io.LimitReader(zeros{}, uploadBytes)); err != nil {
				return err
			}
		}
		plain := float64(uploadRuns*uploadBytes) / (1 << 20) / time.Since(start).Seconds()
		_ = js.DeleteObjectStore(ctx, "bench-uploads")
		r.report.add(Row{Group: "uploads", Name: "upload throughput through the Replicate face (MB/s)", Value: face, Unit: "MB/s", Reference: plain,
			Note: fmt.Sprintf("%d files of %d MB one after another; reference: the same put straight into an Object Store bucket", uploadRuns, uploadBytes>>20)}).
			atLeast(0.5, true, "≥ 0.5 of a plain put")

		r.report.add(Row{Group: "uploads", Name: "upload throughput through fal's upload URL (MB/s)", Value: falRate, Unit: "MB/s", Reference: plain,
			Note: fmt.Sprintf("%d files of %d MB one after another, each a plain PUT of the bytes (no multipart)", uploadRuns, uploadBytes>>20)}).
			atLeast(0.5, true, "≥ 0.5 of a plain put")

		r.progress("%d uploads of %d MB at once: the RSS they add", uploadConcurrent, uploadBytes>>20)
		before, err := rss()
		if err != nil {
			return err
		}
		var peak atomic.Int64
		peak.Store(before)
		sctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return
				case <-t.C:
					if n, err := rss(); err == nil && n > peak.Load() {
						peak.Store(n)
					}
				}
			}
		})
		g, gctx := errgroup.WithContext(ctx)
		got := make([]string, uploadConcurrent)
		for i := range uploadConcurrent {
			g.Go(func() (err error) {
				got[i], err = faceUpload(gctx, client, files, uploadBytes)
				return err
			})
		}
		err = g.Wait()
		stop()
		wg.Wait()
		if err != nil {
			return err
		}
		rise := float64(peak.Load()-before) / (1 << 20)
		r.report.add(Row{Group: "uploads", Name: fmt.Sprintf("RSS rise, %d concurrent %d MB uploads (MB)", uploadConcurrent, uploadBytes>>20), Value: rise, Unit: "MB",
			Note: fmt.Sprintf("peak RSS sampled every 5 ms, over %.0f MB before; the clients run in the same process", float64(before)/(1<<20))}).
			atMost(64, "< 64 MB")
		return deleteFiles(ctx, client, files, got)
	})
}

// zeros reads zeros.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// faceUpload uploads n bytes through the face's files API, streaming the
// multipart body, and returns the file's id.
func faceUpload(ctx context.Context, client *http.Client, url string, n int64) (string, error) {
	// The form as the SDK's fetch sends a FormData of one Blob: its
	// length known, so the body goes unchunked, as it does from the app.
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if _, err := mw.CreateFormFile("content", "bench.bin"); err != nil {
		return "", err
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	form := io.MultiReader(&head, io.LimitReader(zeros{}, n), strings.NewReader(tail))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, form)
	if err != nil {
		return "", err
	}
	req.ContentLength = int64(head.Len()) + n + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("an upload through the face answered %d: %s", resp.StatusCode, body)
	}
	_, rest, ok := strings.Cut(string(body), `"id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	if !ok || id == "" {
		return "", fmt.Errorf("an upload's answer names no file: %s", body)
	}
	return id, nil
}

// falUpload uploads n bytes as fal's client does: the storage initiate
// through the face's proxy, then a plain PUT of the bytes to the
// upload_url it answers.
func falUpload(ctx context.Context, client *http.Client, proxy string, n int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, proxy, strings.NewReader(`{"content_type":"application/octet-stream","file_name":"bench.bin"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-fal-target-url", "https://rest.fal.ai/storage/upload/initiate?storage_type=fal-cdn-v3")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	var init struct {
		UploadURL string `json:"upload_url"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&init)
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("fal's upload initiate answered %d", resp.StatusCode)
	case err != nil:
		return fmt.Errorf("fal's upload initiate: %w", err)
	}
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, init.UploadURL, io.LimitReader(zeros{}, n))
	if err != nil {
		return err
	}
	put.ContentLength = n
	if resp, err = client.Do(put); err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("a PUT to fal's upload URL answered %d", resp.StatusCode)
	}
	return nil
}

// deleteFiles deletes the files uploaded through the face.
func deleteFiles(ctx context.Context, client *http.Client, url string, ids []string) error {
	for _, id := range ids {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url+"/"+id, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
	}
	return nil
}

// rss is the process's resident set size in bytes (Linux).
func rss() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
