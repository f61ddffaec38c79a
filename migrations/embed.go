// Package migrations holds the desk's schema as numbered SQL files, NNNNNN_name.up.sql and
// NNNNNN_name.down.sql, embedded into the binaries. Statements end with ";" at the end of a line.
// Every file must run on MariaDB 10.11 and MySQL 8.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
