// Package redisname names every Redis key and pub/sub channel the desk uses, from one prefix per
// install (FXDESK_REDIS_PREFIX, default "fx"; docs/architecture.md, «Prices on Redis: the quote
// mirror and the tick stream»).
//
// The prefix exists because Redis pub/sub ignores database numbers: a channel is shared by every
// database of a server, so two installs on one server (staging on DB 1, production on DB 0)
// would otherwise feed each other's followers. Keys are per database, but two installs may also
// share one database; they carry the prefix too, so nothing one install writes is read by
// another.
//
// With the default prefix every name is the one operators' runbooks already use:
//
//	fx:ticks                       channel: every tick the lease holder accepts (internal/mirror, the stream)
//	fx:quote-mirror:snapshot       string: the quote mirror's snapshot (internal/mirror)
//	fx:quote-mirror:pins           hash: conversion legs followers asked for
//	fx:quote-mirror:pin-requests   channel: "a follower just pinned something"
//	fx:events                      stream: every event of the outbox, for the host platform (internal/relay)
//	fx:terms-changed               channel: "an admin write was answered": the holder reads the audit log (catalog.TermsFollower)
//	engine:lease:forex-trading     string: hostname:pid of the lease holder (internal/lease)
//
// The rule is <prefix>:<name>, except the lease key, which predates the prefix and keeps its
// bare name under the default: with any other prefix it is <prefix>:engine:lease:<key>
// (staging:engine:lease:forex-trading). A prefix cannot contain ':', so two different prefixes
// never yield the same name.
//
// What it must never do: hold a name anywhere but here, or change a default name — operators
// type them into redis-cli.
package redisname
