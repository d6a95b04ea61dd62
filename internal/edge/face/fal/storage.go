package fal

import (
	"encoding/json"
	"net/http"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// fal's storage upload, as its client makes it for a Blob or File input:
// POST rest.fal.ai/storage/upload/initiate through the proxy, answered
// with an upload_url on Pollux's own front door (signed, expiring,
// single-use: inputs.Store.Issue) and the file_url the input will carry;
// then a plain PUT of the bytes to the upload_url (the front door's
// inputs.UploadPath, no token needed). A submit turns the file_url back
// into the file's reference; a file_url of another token's file is not
// found.

// filesPath is the path of the files below the face's prefix.
const filesPath = "/files/"

// initiateBody is what an upload's initiate says.
type initiateBody struct {
	ContentType string `json:"content_type"`
	FileName    string `json:"file_name"`
}

// initiated is fal's answer to an initiate.
type initiated struct {
	UploadURL string `json:"upload_url"`
	FileURL   string `json:"file_url"`
}

// initiate issues an upload of one file.
func (f *Face) initiate(w http.ResponseWriter, r *http.Request) error {
	if _, err := f.Files(r); err != nil {
		return err // this Pollux keeps no files
	}
	body, err := face.ReadBody(w, r, 16<<10)
	if err != nil {
		return err
	}
	var b initiateBody
	if err := json.Unmarshal(body, &b); err != nil {
		return &face.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_body", Field: "body", Message: "the body must be {content_type, file_name}"}
	}
	id, upload, err := f.IssueUpload(r, b.FileName, b.ContentType)
	if err != nil {
		return err
	}
	return face.WriteJSON(w, http.StatusOK, initiated{UploadURL: upload, FileURL: f.FileURL(r, filesPath, id)})
}

// serveFile answers the bytes of one of the caller's files (its
// file_url, fetched with the app's key).
func (f *Face) serveFile(w http.ResponseWriter, r *http.Request) error {
	return f.ServeFile(w, r, r.PathValue("id"))
}
