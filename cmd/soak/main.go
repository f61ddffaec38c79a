// Command soak runs the desk's chaos soak (`make soak`); internal/testkit/soak is the soak.
package main

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"fxdesk/internal/testkit/soak"
)

func main() {
	seconds := flag.Int("seconds", 60, "how long the load and the faults run")
	seed := flag.Uint64("seed", 0, "fault schedule seed (0: a random one, printed)")
	traders := flag.Int("traders", 4, "concurrent trader clients")
	abook := flag.Int("abook", -1, "how many of the traders trade on the EXTERNAL account group (-1: a third, rounded up)")
	keep := flag.Bool("keep", false, "keep the run folder and the database even when the soak passes")
	plan := flag.Bool("plan", false, "print the fault schedule of -seed and -seconds (and -venue, -cluster) and exit")
	venue := flag.String("venue", "", "the A-book's venue: rest (cmd/venuesim) or fix (cmd/fixvenue); seed or empty picks by seed, fix for a third of seeds")
	prefill := flag.String("prefill", "month", "the generated history the database starts with: month, small or none (docs/soak.md, «A pre-filled month»)")
	cluster := flag.String("cluster", "", "run the desk on clusters started by scripts/cluster.sh: galera, sentinel or galera,sentinel (docs/cluster.md)")
	flag.Parse()
	if *seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		*seed = binary.LittleEndian.Uint64(b[:])>>1 | 1
	}
	d := time.Duration(*seconds) * time.Second
	var clusters []string
	if *cluster != "" {
		clusters = strings.Split(*cluster, ",")
	}
	if *plan {
		lines, err := soak.Plan(*seed, d, clusters, *venue)
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v\n", err)
			os.Exit(2)
		}
		for _, line := range lines {
			fmt.Println(line)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *abook < 0 {
		*abook = (*traders + 2) / 3
	}
	os.Exit(soak.Run(ctx, soak.Options{Seed: *seed, Duration: d, Traders: *traders, External: *abook, Keep: *keep, Cluster: clusters, Venue: *venue, Prefill: *prefill}))
}
