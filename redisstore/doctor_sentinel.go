package redisstore

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// sentinelTimeout bounds each Sentinel's answers in the sentinel check.
const sentinelTimeout = 2 * time.Second

// sentinelCheck asks every Sentinel of fo which server is the primary and
// whether it can authorise a failover (SENTINEL GET-MASTER-ADDR-BY-NAME and
// CKQUORUM): Fail when none answers, Warn when some do not, when they
// disagree on the primary (a failover in progress, or a split) or when one
// cannot reach its quorum.
func sentinelCheck(ctx context.Context, fo *redis.FailoverOptions) driver.Check {
	const name = "sentinel"
	type answer struct {
		primary string
		quorum  error
		err     error
	}
	answers := make([]answer, len(fo.SentinelAddrs))
	var wg sync.WaitGroup
	for i, addr := range fo.SentinelAddrs {
		wg.Go(func() {
			sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: fo.SentinelUsername, Password: fo.SentinelPassword,
				TLSConfig: fo.TLSConfig, DialTimeout: sentinelTimeout, ReadTimeout: sentinelTimeout, MaxRetries: -1})
			defer sc.Close()
			hp, err := sc.GetMasterAddrByName(ctx, fo.MasterName).Result()
			if err != nil || len(hp) != 2 {
				answers[i].err = fmt.Errorf("%s: %v", addr, err)
				return
			}
			answers[i].primary = net.JoinHostPort(hp[0], hp[1])
			if err := sc.CkQuorum(ctx, fo.MasterName).Err(); err != nil {
				answers[i].quorum = fmt.Errorf("%s: %v", addr, err)
			}
		})
	}
	wg.Wait()
	var primaries, problems []string
	for _, a := range answers {
		switch {
		case a.err != nil:
			problems = append(problems, "no answer from "+oneLine(a.err))
		case a.quorum != nil:
			problems = append(problems, "no quorum: "+oneLine(a.quorum))
			primaries = append(primaries, a.primary)
		default:
			primaries = append(primaries, a.primary)
		}
	}
	slices.Sort(primaries)
	distinct := slices.Compact(slices.Clone(primaries))
	d := fmt.Sprintf("%d of %d Sentinels answer for %s", len(primaries), len(fo.SentinelAddrs), fo.MasterName)
	switch {
	case len(primaries) == 0:
		return check(name, driver.Fail, d+": "+strings.Join(problems, "; "), "start the Sentinels or fix their addresses and the master name")
	case len(distinct) > 1:
		return check(name, driver.Warn, d+", and they name different primaries ("+strings.Join(distinct, ", ")+"): a failover is in progress or the Sentinels are split",
			"check SENTINEL MASTERS on each Sentinel")
	case len(problems) > 0:
		return check(name, driver.Warn, d+", primary "+distinct[0]+"; "+strings.Join(problems, "; "),
			"list every Sentinel in the URL and keep a majority of them up, so that a failover can be authorised")
	}
	return check(name, driver.OK, d+": primary "+distinct[0]+", quorum and failover authorisation reachable (CKQUORUM)", "")
}
