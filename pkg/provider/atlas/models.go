package atlas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pollux-dev/pollux/pkg/provider"
)

// modelList caches Atlas Cloud's published model list (GET /models, the
// list the official MCP server validates against), for routes that ask
// for model ids to be checked before the billable submit. One fetch at a
// time; a list older than ttl is fetched again before use; a model missing
// from the list fetches it again only when the last fetch is older than
// ModelsMinRefresh, so a stream of bad ids costs at most one call a
// minute. When no list can be had the check lets the submit through (and
// logs it): Atlas Cloud refuses an unknown model itself, with a 404.
type modelList struct {
	ttl time.Duration

	mu        sync.Mutex
	ids       map[string]bool // lower-cased model ids; nil before a good fetch
	fetchedAt time.Time       // when ids was fetched
	attempted time.Time       // the last fetch, good or not
}

// check refuses a model the published list does not have.
func (m *modelList) check(ctx context.Context, a *Adapter, model string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := a.now()
	fresh := m.ids != nil && now.Sub(m.fetchedAt) < m.ttl
	mayFetch := m.attempted.IsZero() || now.Sub(m.attempted) >= ModelsMinRefresh
	if (!fresh || !m.ids[strings.ToLower(model)]) && mayFetch {
		m.attempted = now
		ids, err := a.fetchModels(ctx)
		if err != nil {
			a.log.Warn().Err(err).Msg("Atlas Cloud's model list could not be fetched; the last one (if any) is used")
		} else {
			m.ids, m.fetchedAt = ids, now
		}
	}
	switch {
	case m.ids == nil:
		return nil // no list to check against: Atlas Cloud's own 404 will tell
	case !m.ids[strings.ToLower(model)]:
		return &provider.Error{Class: provider.Invalid,
			Message: fmt.Sprintf("model %q is not in Atlas Cloud's published model list", clip(model, 200))}
	}
	return nil
}

// fetchModels reads GET /models: {data: [{model, ...}]}.
func (a *Adapter) fetchModels(ctx context.Context) (map[string]bool, error) {
	x, err := a.api.Exchange(ctx, http.MethodGet, "/models", nil, nil)
	if err != nil {
		return nil, err
	}
	if !x.OK() {
		return nil, failure(x, a.now())
	}
	return parseModels(x.Body)
}

// parseModels reads the model ids of a model list; a list without any is
// an error, so a broken answer never empties a good cache.
func parseModels(b []byte) (map[string]bool, error) {
	var doc struct {
		Data []struct {
			Model string `json:"model"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("malformed Atlas Cloud model list: %w", err)
	}
	ids := make(map[string]bool, len(doc.Data))
	for _, m := range doc.Data {
		if m.Model != "" {
			ids[strings.ToLower(m.Model)] = true
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("the Atlas Cloud model list names no model")
	}
	return ids, nil
}
