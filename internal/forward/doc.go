// Package forward lets every web process serve every trader while the lease holder alone still
// decides (docs/architecture.md, «The web tier»). A follower sends desk-priced requests — order
// submits and cancels, closes, SL/TP changes, withdrawals — to the holder the engine_lease row
// advertises, with httputil.ReverseProxy; everything served from the database stays where it lands.
//
// What it owns:
//   - the node-to-node header (Header): HMAC-SHA256 under FXDESK_CLUSTER_SECRET (at least 128
//     bits, config.CheckClusterSecret) over the method, the escaped path, the raw query, the
//     SHA-256 of the body, the lease term the follower read, a timestamp and a random nonce. Edge
//     removes every client copy; to verify one it reads the body (FXDESK_BODY_LIMIT_BYTES at most,
//     413 past it) and hands it on. A header that does not verify, or whose timestamp is more than
//     30 s from the receiver's clock, is refused with 403, RefusedHeader naming the reason, and a
//     warn line (never the secret or the signature).
//   - each header accepted once: the receiver remembers an accepted nonce until the header is
//     stale (60 s at most), so a captured header replayed with any body is refused. The memory is
//     bounded (2^18 nonces, some 4,400 forwards a second held over the window); past it forwarded
//     requests are refused as busy (503) rather than a nonce forgotten.
//   - the forwarder's bounds: a body of at most FXDESK_BODY_LIMIT_BYTES (the same 413 text as the
//     holder, fx.TooLarge); FXDESK_FORWARD_TIMEOUT over the whole forward, the trader's body read
//     included; at most FXDESK_FORWARD_INFLIGHT forwards with the holder, past which the follower
//     answers 503 busy and sends nothing. A follower whose header the holder refuses logs why at
//     error (the fix included) and answers 503: the trader did nothing wrong.
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
