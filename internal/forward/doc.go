// Package forward lets every web process serve every trader while the lease holder alone still
// decides (DESIGN §12, "The web tier scales out"). A follower sends desk-priced requests — order
// submits and cancels, closes, SL/TP changes, withdrawals — to the holder the engine_lease row
// advertises, with httputil.ReverseProxy; everything served from the database stays where it lands.
//
// What it owns:
//   - the node-to-node header (Header): HMAC-SHA256 under FXDESK_CLUSTER_SECRET over the method,
//     the path, the lease term the follower read and a timestamp. Edge removes every client copy;
//     one that does not verify is refused with 403.
//   - one hop at most: a forwarded request is served only by the process serving that exact term;
//     any other answers 503 with the pricing text, Retry-After and NotHolderHeader, and never
//     forwards it again. A follower whose advertised holder is another follower gets that 503,
//     not a cycle.
//   - one look again: a follower refused that way, or unable to connect, re-reads the row once
//     and retries once if the holder changed; otherwise it answers 503 with the pricing text. A
//     forward whose connection died after the request was written answers 504 (fx.EUNKNOWN): the
//     holder may have acted, and a retry with the same requestNonce never opens twice.
//
// What it must never do: decide anything the holder decides. The trader's Authorization travels
// unchanged and the holder authenticates, authorizes and gates the request again; a follower
// never fills or closes at any price it holds.
package forward
