package frontdoor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/pkg/events"
)

// withInputs keeps input files in the door's inputs bucket.
func withInputs(store **inputs.Store) func(d *door, cfg *frontdoor.Config) {
	return func(d *door, cfg *frontdoor.Config) {
		s, err := inputs.Open(context.Background(), d.js, d.ns, inputs.Config{MaxFileBytes: 1 << 20})
		require.NoError(d.t, err)
		cfg.Inputs, *store = s, s
	}
}

// A submission may name only its caller's files, alive: another token's,
// an unknown one or a malformed reference is refused naming the field,
// and nothing is published; the caller's is published as a reference,
// never as the bytes.
func TestASubmissionNamesOnlyItsCallersFiles(t *testing.T) {
	t.Parallel()
	// alice and her rotated token share app studio, and so its files;
	// bob is another app.
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice app=studio\n" +
		tokenA + " act name=alice-rotated app=studio\n" + tokenBob + " act name=bob\n"))
	require.NoError(t, err)
	var store *inputs.Store
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, withInputs(&store))
	f, err := store.Put(t.Context(), inputs.Upload{Owner: "app:studio", Body: bytes.NewReader(bytes.Repeat([]byte("img"), 1000))})
	require.NoError(t, err)
	submit := func(token, ref string) reply {
		return d.do(t, "POST", "/v1/jobs", `{"route":"sim","v":1,"model":"m","input":{"frames":["`+ref+`"]}}`,
			map[string]string{"Authorization": "Bearer " + token})
	}
	requireError(t, submit(tokenBob, f.Ref()), http.StatusBadRequest, frontdoor.CodeInvalidParameter, "input.frames[0]")
	requireError(t, submit(tokenAlice, inputs.Scheme+strings.Repeat("0", 32)), http.StatusBadRequest, frontdoor.CodeInvalidParameter, "input.frames[0]")
	requireError(t, submit(tokenAlice, inputs.Scheme+"nope"), http.StatusBadRequest, frontdoor.CodeInvalidParameter, "input.frames[0]")
	info, err := d.res.Intake.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing published")

	r := submit(tokenAlice, f.Ref())
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	r2 := submit(tokenA, f.Ref())
	require.Equal(t, http.StatusAccepted, r2.status, "a token of the same app names the app's file: %s", r2.raw)
	m, err := events.DecodeSubmit(d.lastIntake(t, d.ns.Submit(route)))
	require.NoError(t, err)
	require.JSONEq(t, `{"frames":["`+f.Ref()+`"]}`, string(m.Input), "the reference, not the bytes")
}

// get fetches u without a token.
func get(t *testing.T, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// put PUTs body to u without a token.
func put(t *testing.T, u string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, u, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// The signed paths need no token, only their signature: a provider
// fetches a file by its URL, an altered one is refused; an issued upload
// URL takes one PUT.
func TestSignedInputPaths(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n"))
	require.NoError(t, err)
	var store *inputs.Store
	d := setupWith(t, frontdoor.Config{Tokens: tokens}, withInputs(&store))
	b := bytes.Repeat([]byte("frame"), 50_000)
	f, err := store.Put(t.Context(), inputs.Upload{Owner: "app:alice", ContentType: "image/png", Body: bytes.NewReader(b)})
	require.NoError(t, err)

	u := store.URL(d.url, f)
	status, got := get(t, u)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, b, got)
	status, _ = get(t, strings.Replace(u, "sig=", "sig=0", 1))
	require.Equal(t, http.StatusForbidden, status, "an altered signature")
	status, _ = get(t, d.url+inputs.FetchPath(f.ID))
	require.Equal(t, http.StatusForbidden, status, "no signature")

	tk, err := store.Issue(t.Context(), "alice", "a.png", "image/png")
	require.NoError(t, err)
	up := tk.UploadURL(d.url)
	require.Equal(t, http.StatusOK, put(t, up, b))
	require.Equal(t, http.StatusForbidden, put(t, up, b), "used already")
	uploaded, err := store.Get(t.Context(), "alice", tk.ID)
	require.NoError(t, err)
	require.Equal(t, int64(len(b)), uploaded.Size)
	pu, _ := url.Parse(up)
	require.Equal(t, http.StatusForbidden, put(t, d.url+pu.Path+"?exp=1&sig=x", b), "never issued so")

	big, err := store.Issue(t.Context(), "alice", "b.png", "image/png")
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, put(t, big.UploadURL(d.url), make([]byte, 1<<20+1)))
	_, err = store.Get(t.Context(), "alice", big.ID)
	require.ErrorIs(t, err, inputs.ErrNotFound, "nothing of the refused upload")
}

// Through the Replicate face, a file is its token's: another token's
// get and delete of it are the face's 404, and its create naming the
// file's urls.get is refused naming input.image; the uploader's create
// publishes the file's reference.
func TestAFaceFileIsItsTokens(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(tokenAlice + " act name=alice\n" + tokenBob + " act name=bob\n"))
	require.NoError(t, err)
	var store *inputs.Store
	d := setupWith(t, frontdoor.Config{Tokens: tokens, Faces: []face.Mount{{Kind: face.Replicate, Route: route}}}, withInputs(&store))
	send := func(token, method, path, ctype string, body io.Reader) (int, map[string]any) {
		req, err := http.NewRequestWithContext(t.Context(), method, d.url+"/replicate/sim/v1"+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Token "+token)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("content", "cat.png")
	require.NoError(t, err)
	_, _ = fw.Write(bytes.Repeat([]byte("png"), 1000))
	require.NoError(t, mw.Close())
	status, f := send(tokenAlice, http.MethodPost, "/files", mw.FormDataContentType(), &form)
	require.Equal(t, http.StatusCreated, status, "%v", f)
	id := f["id"].(string)
	get := f["urls"].(map[string]any)["get"].(string)

	// Another app's file answers every verb exactly as an unknown id.
	unknown := strings.Repeat("0", len(id))
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		status, body := send(tokenBob, method, "/files/"+id, "", nil)
		wantStatus, want := send(tokenBob, method, "/files/"+unknown, "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s another app's file", method)
		require.Equal(t, wantStatus, status, method)
		got, err := json.Marshal(body)
		require.NoError(t, err)
		same, err := json.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, strings.ReplaceAll(string(same), unknown, "{id}"), strings.ReplaceAll(string(got), id, "{id}"), "%s: the body of an unknown id", method)
	}
	status, list := send(tokenBob, http.MethodGet, "/files", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, list["results"])

	create := `{"input":{"prompt":"a cat","image":"` + get + `"}}`
	status, p := send(tokenBob, http.MethodPost, "/models/acme/video/predictions", "application/json", strings.NewReader(create))
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", p)
	require.Equal(t, "input.image", p["invalid_fields"].([]any)[0].(map[string]any)["field"])
	info, err := d.res.Intake.Info(t.Context())
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs, "nothing published")

	status, p = send(tokenAlice, http.MethodPost, "/models/acme/video/predictions", "application/json", strings.NewReader(create))
	require.Equal(t, http.StatusCreated, status, "%v", p)
	require.Equal(t, get, p["input"].(map[string]any)["image"], "shown as sent")
	m, err := events.DecodeSubmit(d.lastIntake(t, d.ns.Submit(route)))
	require.NoError(t, err)
	require.JSONEq(t, `{"prompt":"a cat","image":"`+inputs.Scheme+id+`"}`, string(m.Input))
}

// postForm POSTs fields and then a part named file (when file is not
// nil) as multipart/form-data to u, as Runway's SDK posts to its
// uploadUrl, and returns the status.
func postForm(t *testing.T, u string, fields map[string]string, file []byte) int {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(t, mw.WriteField(k, v))
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "frame.png")
		require.NoError(t, err)
		_, err = fw.Write(file)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, &buf)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// An issued upload URL takes one multipart POST too (a storage bucket's
// POST policy, as Runway's uploads.createEphemeral sends): the part named
// file is the upload, the other fields are read and left; a form without
// one, or a body that is not a form, is refused and stores nothing.
func TestSignedUploadByForm(t *testing.T) {
	t.Parallel()
	var store *inputs.Store
	d := setupWith(t, frontdoor.Config{}, withInputs(&store))
	b := bytes.Repeat([]byte("frame"), 50_000)
	tk, err := store.Issue(t.Context(), "alice", "a.png", "")
	require.NoError(t, err)
	up := tk.UploadURL(d.url)
	require.Equal(t, http.StatusBadRequest, postForm(t, up, map[string]string{"key": "x"}, nil), "no file part")
	require.Equal(t, http.StatusRequestEntityTooLarge, postForm(t, up, map[string]string{"policy": strings.Repeat("p", 64<<10+1)}, b))
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, up, bytes.NewReader(b))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "not a form")
	_, err = store.Get(t.Context(), "alice", tk.ID)
	require.ErrorIs(t, err, inputs.ErrNotFound, "nothing stored by the refused posts")

	require.Equal(t, http.StatusNoContent, postForm(t, up, map[string]string{"key": "x", "metadata": "m"}, b))
	require.Equal(t, http.StatusForbidden, postForm(t, up, nil, b), "used already")
	f, err := store.Get(t.Context(), "alice", tk.ID)
	require.NoError(t, err)
	require.Equal(t, int64(len(b)), f.Size)
	require.Equal(t, "application/octet-stream", f.ContentType, "the part's type")
}
