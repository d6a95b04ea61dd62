package generic

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"time"
)

// jwtSkew is how far before now a minted token becomes valid, for clocks
// that differ a little.
const jwtSkew = 5 * time.Second

// mintJWT returns an HS256 JWT with iss = accessKey, valid from now - 5 s
// until now + ttl, signed with secretKey: the token Kling asks for.
func mintJWT(accessKey, secretKey string, now time.Time, ttl time.Duration) string {
	enc := base64.RawURLEncoding
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT"}) // strings only: cannot fail
	claims, _ := json.Marshal(map[string]any{
		"iss": accessKey,
		"exp": now.Add(ttl).Unix(),
		"nbf": now.Add(-jwtSkew).Unix(),
	})
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(secretKey))
	_, _ = mac.Write([]byte(signing)) // a hash never fails to write
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}
