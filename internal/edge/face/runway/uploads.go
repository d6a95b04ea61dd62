package runway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/pollux-dev/pollux/internal/core/inputs"
	"github.com/pollux-dev/pollux/internal/edge/face"
)

// Runway's ephemeral uploads, as the SDK's uploads.createEphemeral makes
// them: POST /v1/uploads {filename, type: "ephemeral"}, answered with an
// uploadUrl and the form fields to post with the file — here an upload
// URL on Pollux's own front door (signed, expiring, single use:
// inputs.Store.Issue; the SDK posts the file part to it with no token)
// and no fields — and the runwayUri the app then gives as promptImage.
// A create turns that URI into the file's reference; one of another
// app's file is not found.

// uriPrefix begins the runwayUri of a file Pollux keeps.
const uriPrefix = "runway://pollux/"

// upload issues an ephemeral upload of one file.
func (f *Face) upload(w http.ResponseWriter, r *http.Request) error {
	if _, err := f.Files(r); err != nil {
		return err // this Pollux keeps no files
	}
	body, err := face.ReadBody(w, r, 16<<10)
	if err != nil {
		return err
	}
	var b struct {
		Filename *string `json:"filename"`
		Type     *string `json:"type"`
	}
	if err := face.DecodeObject(body, &b); err != nil {
		return err
	}
	switch {
	case b.Filename == nil || *b.Filename == "" || len(*b.Filename) > 255:
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "filename", Message: "filename: required, at most 255 bytes"}
	case b.Type == nil || *b.Type != "ephemeral":
		return &face.Error{Status: http.StatusBadRequest, Code: "invalid_field", Field: "type", Message: `type: "ephemeral"`}
	}
	id, upload, err := f.IssueUpload(r, *b.Filename, "")
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, map[string]any{"uploadUrl": upload, "fields": map[string]string{}, "runwayUri": uriPrefix + id})
}

// fileOf is the id of the file s names as a runwayUri the face gave.
func fileOf(s string) (string, bool) {
	id, ok := strings.CutPrefix(s, uriPrefix)
	return id, ok && inputs.ValidID(id)
}

// refs is a create's body with each runwayUri the face gave and each
// large data: URI replaced by its file's reference (face.Kit.DataRefs).
func (f *Face) refs(w http.ResponseWriter, r *http.Request, body json.RawMessage) (json.RawMessage, error) {
	return f.DataRefs(w, r, body, "", fileOf)
}
