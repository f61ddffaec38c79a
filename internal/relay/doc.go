// Package relay is the host platform's feed (docs/events.md): it moves the events outbox
// (internal/events, table fx_event) out of the database, on the engine lease holder only.
//
//   - Stream appends every event, in id order, to one Redis Stream (<prefix>:events, bounded by
//     XADD MAXLEN ~), with the event id as the entry id (<id>-0), then records how far it got
//     in fx_event_relay ('stream'). The read, the XADDs and the position's write are one
//     transaction that holds the cursor row's lock from the read to COMMIT and ends with the
//     lease fence: a relay on a process that no longer holds the lease writes nothing, and one
//     killed between the XADDs and the COMMIT sends again from the stored position (Redis
//     refuses an entry id that is not above the stream's newest, so the stream keeps one).
//   - Webhooks posts every event to each enabled endpoint (fx_webhook), one event per POST,
//     signed with the endpoint's secret (Sign), each endpoint with its own goroutine and its
//     own cursor ('webhook:<id>'): a failing or slow endpoint holds back only itself. A post
//     that fails is retried with exponential backoff; after the last attempt the event goes to
//     the endpoint's dead letters (fx_webhook_dead) and the cursor moves on.
//   - Admin creates, lists and changes endpoints (audited like every admin write), lists dead
//     letters and replays one; ReadStatus reports every cursor's lag and the open dead letters.
//   - PruneTask deletes, through events.Prune, events past the retention that every consumer
//     has: a retention.Task, run in batches by the retention runner beside the relay, never in
//     its loop (docs/operations.md, «Retention»).
//
// Delivery is at least once: the event id is the consumer's idempotency key.
//
// What it must never do: write fx_event (events owns that table), send anything while the gate
// refuses (gate.EventRelay, gate.WebhookSend), or move a cursor outside a fenced transaction.
package relay
