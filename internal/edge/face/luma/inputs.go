package luma

import (
	"encoding/json"

	"github.com/pollux-dev/pollux/internal/edge/face"
)

// keyframe is one of a create's keyframes: an image by URL, or an
// earlier generation by id.
type keyframe struct {
	Type *string `json:"type"`
	URL  *string `json:"url"`
	ID   *string `json:"id"`
}

// checkKeyframes checks a create's keyframes as Luma does: an object of
// frame0 and frame1, each an image ({type: "image", url}: an https URL or
// a data: URI, face.CheckInputURL) or a generation ({type: "generation",
// id}).
func checkKeyframes(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var frames map[string]json.RawMessage
	if json.Unmarshal(raw, &frames) != nil || frames == nil {
		return invalid("keyframes", "keyframes: an object of frame0 and frame1")
	}
	for name, v := range frames {
		field := "keyframes." + name
		var k keyframe
		switch {
		case name != "frame0" && name != "frame1":
			return invalid(field, field+": keyframes are frame0 and frame1")
		case json.Unmarshal(v, &k) != nil || k.Type == nil:
			return invalid(field, field+": an object of type (image or generation) and its url or id")
		case *k.Type == "image" && k.URL == nil:
			return invalid(field+".url", field+".url: required for an image")
		case *k.Type == "image":
			if err := face.CheckInputURL(field+".url", *k.URL); err != nil {
				return err // a 422, as WriteError answers a field at fault
			}
		case *k.Type == "generation" && (k.ID == nil || !face.IsUUID(*k.ID)):
			return invalid(field+".id", field+".id: a generation's id")
		case *k.Type != "image" && *k.Type != "generation":
			return invalid(field+".type", field+".type: image or generation")
		}
	}
	return nil
}
