package signature_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/pollux-dev/pollux/pkg/signature"
)

func ExampleVerifier() {
	// At startup: a Verifier for the endpoint's secret(s), from config.
	v, err := signature.NewVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err) // a bad secret is a config error: refuse to start
	}
	v.Now = func() time.Time { return time.Unix(1614265330, 0) } // only for this example

	// Per request: the headers and the raw body, exactly as received.
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	id, err := v.Verify(h, []byte(`{"test": 2432232314}`))
	fmt.Println(id, err)

	// The same delivery with its body re-serialised does not verify.
	_, err = v.Verify(h, []byte(`{"test":2432232314}`))
	fmt.Println(err)
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek <nil>
	// signature: no matching signature
}
