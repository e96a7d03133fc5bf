// crondiff prints the slots robfig/cron v3 computes (the library the Kubernetes CronJob
// controller uses), for the differential test of src/eru/schedule.rs (tests/cron_differential.rs).
//
// Input, one case a line: EXPR <TAB> TIMEZONE <TAB> AFTER (RFC 3339) <TAB> COUNT
// Output, one line a case: the slots as RFC 3339 UTC, comma-separated, or "ERR <message>".
//
// Like the CronJob controller, the time zone is given as a "TZ=<zone> " prefix; a 6-field
// expression has a leading seconds field (the Eru extension; CronJobs take 5 fields).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

func main() {
	parser := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		parts := strings.Split(in.Text(), "\t")
		if len(parts) != 4 {
			fmt.Fprintln(out, "ERR malformed input line")
			continue
		}
		expr, zone := parts[0], parts[1]
		after, err := time.Parse(time.RFC3339, parts[2])
		count, err2 := strconv.Atoi(parts[3])
		if err != nil || err2 != nil {
			fmt.Fprintln(out, "ERR malformed input line")
			continue
		}
		spec := expr
		if !strings.HasPrefix(expr, "@") || zone != "" {
			spec = "TZ=" + zone + " " + expr
		}
		schedule, err := parser.Parse(spec)
		if err != nil {
			fmt.Fprintln(out, "ERR", err)
			continue
		}
		slots := make([]string, 0, count)
		t := after
		for i := 0; i < count; i++ {
			t = schedule.Next(t)
			if t.IsZero() {
				break
			}
			slots = append(slots, t.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(out, strings.Join(slots, ","))
	}
}
