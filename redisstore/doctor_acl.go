package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"example.com/dlock/driver"
)

// aclProbe is one command the store needs, with arguments for ACL DRYRUN.
type aclProbe struct {
	cmd  string
	args func(lock, channel string) []any
}

// lockCommands are the commands the store sends (directly, or from its Lua
// scripts, where ACLs apply too): the scripts call GET, SET, PTTL, PEXPIRE,
// TIME and PUBLISH (no DEL or INCR: a lock is one key, its fences come from
// the server's clock); waiting subscribes; Waiters and List use PUBSUB
// NUMSUB and SCAN.
var lockCommands = []aclProbe{
	{"EVALSHA", func(l, _ string) []any { return []any{strings.Repeat("0", 40), 1, l} }},
	{"EVAL", func(l, _ string) []any { return []any{"return 1", 1, l} }},
	{"SCRIPT", func(string, string) []any { return []any{"LOAD", "return 1"} }},
	{"SUBSCRIBE", func(_, c string) []any { return []any{c} }},
	{"PUBLISH", func(_, c string) []any { return []any{c, "released"} }},
	{"SET", func(l, _ string) []any { return []any{l, "1:x", "NX", "PX", 1000, "GET"} }},
	{"GET", func(l, _ string) []any { return []any{l} }},
	{"PTTL", func(l, _ string) []any { return []any{l} }},
	{"PEXPIRE", func(l, _ string) []any { return []any{l, 1000} }},
	{"TIME", func(string, string) []any { return nil }},
	{"PUBSUB", func(_, c string) []any { return []any{"NUMSUB", c} }},
	{"SCAN", func(string, string) []any { return []any{0, "TYPE", "string"} }},
}

// fairCommands are the commands the fair scripts add (fair.lua,
// fair_leave.lua, fair_waiters.lua): the queue is a list and a sorted set.
var fairCommands = []aclProbe{
	{"ZADD", func(l, _ string) []any { return []any{l + ":waiters", 1, "t"} }},
	{"ZREM", func(l, _ string) []any { return []any{l + ":waiters", "t"} }},
	{"ZRANGE", func(l, _ string) []any { return []any{l + ":waiters", -1, -1, "WITHSCORES"} }},
	{"ZRANGEBYSCORE", func(l, _ string) []any { return []any{l + ":waiters", "-inf", 1} }},
	{"ZREMRANGEBYSCORE", func(l, _ string) []any { return []any{l + ":waiters", "-inf", 1} }},
	{"ZCOUNT", func(l, _ string) []any { return []any{l + ":waiters", 1, "+inf"} }},
	{"RPUSH", func(l, _ string) []any { return []any{l + ":queue", "t"} }},
	{"LREM", func(l, _ string) []any { return []any{l + ":queue", 1, "t"} }},
	{"LINDEX", func(l, _ string) []any { return []any{l + ":queue", 0} }},
	{"PEXPIREAT", func(l, _ string) []any { return []any{l + ":queue", 1} }},
	{"EXISTS", func(l, _ string) []any { return []any{l + ":queue"} }},
}

// fairProbeScript is probeScript for fairCommands, on the throw-away
// lock's queue keys (KEYS = [queue, waiters]); the member it adds is
// removed, and both keys are expired, before it returns.
var fairProbeScript = redis.NewScript(probeHelper + `
try('ZADD', KEYS[2], 1, 't')
try('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
try('ZRANGEBYSCORE', KEYS[2], '-inf', 1)
try('ZCOUNT', KEYS[2], 1, '+inf')
try('ZREMRANGEBYSCORE', KEYS[2], '-inf', 1)
try('ZREM', KEYS[2], 't')
try('RPUSH', KEYS[1], 't')
try('LINDEX', KEYS[1], 0)
try('LREM', KEYS[1], 1, 't')
try('EXISTS', KEYS[1])
try('PEXPIREAT', KEYS[1], 1)
redis.pcall('PEXPIRE', KEYS[1], 1000)
redis.pcall('PEXPIRE', KEYS[2], 1000)
return denied
`)

// probeScript runs the commands of the store's Lua scripts on a throw-away
// lock and returns the names of those the ACL denies. The key expires after
// a second.
var probeScript = redis.NewScript(probeHelper + `
try('TIME')
try('GET', KEYS[1])
try('SET', KEYS[1], '1:dlock-doctor', 'NX', 'PX', 1000, 'GET')
try('PTTL', KEYS[1])
try('PEXPIRE', KEYS[1], 1000)
try('PUBLISH', ARGV[1], 'released')
return denied
`)

// probeHelper defines try(name, ...), which runs a command and records its
// name in denied if the ACL refuses it.
const probeHelper = `
local denied = {}
local function try(name, ...)
  local r = redis.pcall(name, ...)
  if type(r) == 'table' and r.err then
    local e = string.lower(r.err)
    if string.find(e, "can't", 1, true) or string.find(e, 'noperm', 1, true) or string.find(e, 'permission', 1, true) then
      table.insert(denied, name)
    end
  end
end
`

// aclCheck reports which of the store's commands (with fair, the fair
// scripts' too) the connection's user may not run: by ACL DRYRUN where the
// server has it and the user may call it, otherwise by trying them on a
// throw-away key.
func aclCheck(ctx context.Context, c redis.UniversalClient, prefix string, fair bool) driver.Check {
	const name = "acl"
	var b [6]byte
	_, _ = rand.Read(b[:])
	lock := prefix + "{dlock-doctor-" + hex.EncodeToString(b[:]) + "}"
	channel := lock + ":released"
	user, err := c.Do(ctx, "ACL", "WHOAMI").Text()
	dry := err == nil // before Redis 6, or WHOAMI forbidden: no DRYRUN either
	if !dry {
		user = clientUser(c)
	}
	var denied []string
	how := "ACL DRYRUN"
	probes := lockCommands
	if fair {
		probes = append(slices.Clip(lockCommands), fairCommands...)
	}
	if !dry || !dryRun(ctx, c, user, lock, channel, probes, &denied) {
		how = "trying each command"
		denied = tryCommands(ctx, c, lock, channel, fair)
	}
	who := "this user"
	if user != "" {
		who = "user " + user
	}
	if len(denied) == 0 {
		return check(name, driver.OK, fmt.Sprintf("%s may run every command dlock needs (checked by %s)", who, how), "")
	}
	return check(name, driver.Warn,
		fmt.Sprintf("%s may not run %s (checked by %s): locking fails with NOPERM errors", who, strings.Join(denied, ", "), how),
		fmt.Sprintf("ACL SETUSER %s %s ~%s* &%s*", cmp.Or(user, "USER"), aclGrants(denied), prefix, prefix))
}

// aclGrants spells the ACL rules that allow the denied commands.
func aclGrants(denied []string) string {
	sub := map[string]string{"SCRIPT": "script|load", "PUBSUB": "pubsub|numsub"}
	rules := make([]string, len(denied))
	for i, d := range denied {
		rules[i] = "+" + cmp.Or(sub[d], strings.ToLower(d))
	}
	return strings.Join(rules, " ")
}

// clientUser is the user name the client logs in with, "" if unknown.
func clientUser(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Username
	case *redis.ClusterClient:
		return c.Options().Username
	}
	return ""
}

// dryRun asks ACL DRYRUN about every probe. It reports false, leaving denied
// alone, if DRYRUN itself is unavailable (Redis < 7) or forbidden.
func dryRun(ctx context.Context, c redis.UniversalClient, user, lock, channel string, probes []aclProbe, denied *[]string) bool {
	var out []string
	for _, p := range probes {
		args := append([]any{"ACL", "DRYRUN", user, p.cmd}, p.args(lock, channel)...)
		res, err := c.Do(ctx, args...).Text()
		if err != nil {
			return false
		}
		if res != "OK" {
			out = append(out, p.cmd)
		}
	}
	*denied = out
	return true
}

// tryCommands runs the store's commands (with fair, the fair scripts' too)
// for real on a throw-away key.
func tryCommands(ctx context.Context, c redis.UniversalClient, lock, channel string, fair bool) []string {
	var denied []string
	deny := func(cmd string, err error) {
		if isDenied(err) {
			denied = append(denied, cmd)
		}
	}
	res, err := probeScript.Eval(ctx, c, []string{lock}, channel).StringSlice()
	deny("EVAL", err)
	denied = append(denied, res...)
	deny("SCRIPT", probeScript.Load(ctx, c).Err())
	deny("EVALSHA", probeScript.EvalSha(ctx, c, []string{lock}, channel).Err())
	deny("SUBSCRIBE", trySubscribe(ctx, c, channel))
	deny("PUBSUB", c.PubSubNumSub(ctx, channel).Err())
	deny("SCAN", c.ScanType(ctx, 0, lock, 1, "string").Err())
	if fair {
		res, err := fairProbeScript.Eval(ctx, c, []string{lock + ":queue", lock + ":waiters"}).StringSlice()
		deny("EVAL", err)
		denied = append(denied, res...)
	}
	slices.Sort(denied)
	return slices.Compact(denied)
}

func trySubscribe(ctx context.Context, c redis.UniversalClient, channel string) error {
	ps := c.Subscribe(ctx)
	defer ps.Close()
	if err := ps.Subscribe(ctx, channel); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := ps.Receive(rctx)
	return err
}

func isDenied(err error) bool {
	if err == nil {
		return false
	}
	e := strings.ToLower(err.Error())
	return strings.Contains(e, "noperm") || strings.Contains(e, "can't run") || strings.Contains(e, "can't access") || strings.Contains(e, "no permissions")
}
