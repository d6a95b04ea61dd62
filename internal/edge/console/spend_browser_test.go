package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/edge/frontdoor"
	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/tools/dev"
)

// The tokens of the spend test: each app's, and an operator's.
const (
	studioToken = "studio-token-0123456789abcdef"
	rivalToken  = "rival-token-0123456789abcdef"
)

// The spend page, in the browser: an operator sees each app's spend, a
// bar a day against its day budget and the costs by route and model; an
// app's read token sees its own app's only. (Screenshots: spend-operator,
// spend-app-page, spend-app-jobs.)
func TestSpendPage(t *testing.T) {
	t.Parallel()
	tokens, err := frontdoor.ParseTokens(strings.NewReader(actToken + " admin name=" + actName + "\n" +
		studioToken + " act app=studio\n" + rivalToken + " act app=rival\n" + readToken + " read app=studio name=" + readName + "\n"))
	require.NoError(t, err)
	f := startFleetConfig(t, tokens, false,
		config.Route{Prices: map[string]config.Price{"*": {Per: "job", Price: 1.25}, otherModel: {Per: "job", Price: 0.5}}},
		map[string]config.App{"studio": {Budgets: config.SpendBudgets{Day: 10, Month: 200}}, "rival": {Budgets: config.SpendBudgets{Day: 3}}})
	for i := range 4 {
		require.Equal(t, http.StatusAccepted, f.create(t, studioToken, otherModel, fmt.Sprint("studio-", i)))
	}
	require.Equal(t, http.StatusAccepted, f.create(t, studioToken, quickModel, "studio-q"))
	require.Equal(t, http.StatusAccepted, f.create(t, rivalToken, otherModel, "rival-0"))
	for i := range 2 {
		require.Equal(t, http.StatusAccepted, f.create(t, rivalToken, quickModel, fmt.Sprint("rival-q", i)))
	}
	require.Equal(t, http.StatusTooManyRequests, f.create(t, rivalToken, quickModel, "rival-over"), "past rival's day budget of 3")

	b := newTab(t, f.HTTPURL)
	b.login(actToken, "admin")
	b.open("#/spend", "section.spend-app")
	b.waitJS("both apps' jobs ended and counted", `document.querySelectorAll('section.spend-app').length === 2 &&
		[...document.querySelectorAll('table.spend-lines tbody tr')].reduce((n, tr) => n + Number(tr.children[2].textContent), 0) === 8`, live)
	require.Equal(t, []string{"rival", "studio"}, eval[[]string](b, `[...document.querySelectorAll('section.spend-app')].map(s => s.dataset.app)`))
	require.Equal(t, "3.25", b.text(`section.spend-app[data-app=studio] b.today`), "4 × 0.5 + 1.25")
	require.Equal(t, "3", b.text(`section.spend-app[data-app=rival] b.today`))
	require.Equal(t, 30, eval[int](b, `document.querySelectorAll('section.spend-app[data-app=studio] svg.days rect.bar').length`), "a bar a day")
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll('section.spend-app[data-app=studio] svg.days line.budget').length`), "the day budget drawn")
	require.Contains(t, b.text(`section.spend-app[data-app=rival] .spend-figures`), "(100 %)")
	b.shot("spend-operator")

	r := newTab(t, f.HTTPURL)
	r.login(readToken, "read")
	r.open("#/spend", "section.spend-app")
	require.Equal(t, []string{"studio"}, eval[[]string](r, `[...document.querySelectorAll('section.spend-app')].map(s => s.dataset.app)`), "an app sees its own spend only")
	require.Contains(t, r.text("#who"), "app studio")
	r.shot("spend-app-page")
	r.open("#/jobs", "#live.on")
	r.waitJS("the app's jobs listed", `document.querySelectorAll('table.jobs tbody tr').length === 5`, live)
	r.shot("spend-app-jobs")
}

// create submits a job of model with the key as the app of tok, and
// returns the status.
func (f *fleet) create(t *testing.T, tok, model, key string) int {
	t.Helper()
	body := fmt.Sprintf(`{"v":1,"route":%q,"model":%q,"idempotency_key":%q,"input":{}}`, dev.RouteName, model, key)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.HTTPURL+"/v1/jobs", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res.StatusCode
}
