// Package providertest is what every provider adapter's tests share: a
// scripted fake of a provider's HTTP API (Server), and a conformance suite
// (Run) that puts an adapter through the same checks as every other one —
// a submit answered, each normalized state read, rate limits with their
// Retry-After, refused credentials, 5xx, garbage and oversized answers,
// unknown jobs, timeouts, remote ids that could change the path, cancel or
// its absence, poll-after hints. An adapter's tests supply only its wire
// shapes (a Harness: where its calls go and the provider's documented
// answers) and keep their own tests for what only that adapter does:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, providertest.Harness{
//			New: func(t *testing.T, srv *providertest.Server) provider.Adapter { ... srv.URL ... },
//			Token: testToken,
//			Submit: provider.SubmitRequest{Model: "owner/model"}, SubmitKey: "POST /v1/jobs", ...
//		})
//	}
//
// It imports no NATS, like the adapters it tests.
package providertest
