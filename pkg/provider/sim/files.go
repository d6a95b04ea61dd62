package sim

import (
	"hash/fnv"
	"net/http"
	"strconv"
)

// handleFile serves GET /files/{id}/output.mp4, a succeeded prediction's
// output when the sim serves outputs (Config.OutputBytes): OutputBytes
// deterministic bytes (OutputFile), with their length. A prediction that
// is unknown, not succeeded, served no file or had it deleted is answered
// 404. Files need no token, as a provider's delivery URLs need none.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	now := s.cfg.Now()
	s.mu.Lock()
	p := s.preds[id]
	size := int64(0)
	if p != nil && !p.outputGone && !p.lostBy(now) && p.at(now).status == StatusSucceeded {
		size = p.outputBytes
	}
	s.mu.Unlock()
	if size <= 0 {
		writeNotFound(w)
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		return
	}
	buf := make([]byte, 32<<10)
	seed := fileSeed(id)
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		for i := range n {
			buf[i] = outputByte(seed, off+i)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
		off += n
	}
}

// outputByte is byte off of the output file of the prediction whose id
// hashes to seed (fileSeed).
func outputByte(seed uint64, off int64) byte {
	x := seed ^ uint64(off)*0x9e3779b97f4a7c15
	x ^= x >> 29
	return byte(x)
}

// fileSeed is the seed of prediction id's output bytes.
func fileSeed(id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return h.Sum64()
}

// OutputFile returns the bytes of prediction id's output file as the sim
// serves it, size bytes of them.
func OutputFile(id string, size int64) []byte {
	b := make([]byte, size)
	seed := fileSeed(id)
	for i := range b {
		b[i] = outputByte(seed, int64(i))
	}
	return b
}

// DeleteOutput deletes prediction id's output file, as a provider does
// when its retention ends: from now on it is answered 404. It reports
// whether the prediction exists.
func (s *Server) DeleteOutput(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.preds[id]
	if p == nil {
		return false
	}
	p.outputGone = true
	return true
}
