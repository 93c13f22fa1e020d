package infra

import (
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/rs/zerolog"
)

// toolVariables are read by the project's tools (as are SECKILL_TEST_* and SECKILL_BENCH_*).
var toolVariables = map[string]bool{
	"SECKILL_SALE_SCREENSHOT": true, // make sale-screenshot
	"SECKILL_BUCKETS_MEASURE": true, // the bucket scaling measurement test
	"SECKILL_MEASURE_WARM":    true, // the session warm-up measurement test
}

// removedVariables were settings until this release; each still set is
// warned about with what replaces it. One release on, they read as unknown.
var removedVariables = map[string]string{
	"SECKILL_BATCH_LINGER":              "Tuning.BatchLinger",
	"SECKILL_BUCKETS":                   "Tuning.Buckets; an admin may ask for \"buckets\" per voucher",
	"SECKILL_BUCKETS_ABOVE":             "Tuning.BucketsAbove; an admin may ask for \"buckets\" per voucher",
	"SECKILL_ID_BLOCK":                  "Tuning.IDBlock",
	"SECKILL_KEY_RETENTION":             "Tuning.KeyRetention",
	"SECKILL_MAX_DELIVERIES":            "Tuning.MaxDeliveries",
	"SECKILL_MIGRATE":                   "migrations run at start unless serve --no-migrate is given",
	"SECKILL_QUEUE_CAPACITY":            "Tuning.QueueCapacity",
	"SECKILL_RATE_WINDOW":               "Tuning.RateWindow",
	"SECKILL_REDIS_AUTOPIPELINE":        "Tuning.RedisAutoPipeline",
	"SECKILL_REDIS_AUTOPIPELINE_DELAY":  "Tuning.RedisAutoPipelineDelay",
	"SECKILL_REDIS_AUTOPIPELINE_SHARDS": "Tuning.RedisAutoPipelineShards",
	"SECKILL_REDIS_POOL_SIZE":           "Tuning.RedisPoolSize",
	"SECKILL_REDIS_TIMEOUT":             "Tuning.RedisTimeout",
	"SECKILL_RESTORE_INTERVAL":          "Tuning.RestoreInterval",
	"SECKILL_SOLDOUT_WINDOW":            "Tuning.SoldOutWindow",
	"SECKILL_STREAM_BLOCK":              "Tuning.StreamBlock",
	"SECKILL_STREAM_GROUP":              "Tuning.StreamGroup",
	"SECKILL_TOKEN_CACHE_SIZE":          "Tuning.TokenCacheSize",
	"SECKILL_TOKEN_CACHE_TTL":           "Tuning.TokenCacheTTL",
	"SECKILL_TOKEN_TTL":                 "Tuning.TokenTTL",
	"SECKILL_TOKEN_WARM":                "Tuning.TokenWarm",
	"SECKILL_WORKERS":                   "Tuning.Workers",
}

// RemovedVariable is a set SECKILL_* variable that is no longer read, with what took its place.
type RemovedVariable struct{ Name, Instead string }

// RemovedVariables finds the removed SECKILL_* variables of environ.
func RemovedVariables(environ []string) []RemovedVariable {
	var out []RemovedVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if instead, ok := removedVariables[name]; ok {
			out = append(out, RemovedVariable{Name: name, Instead: instead})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// UnknownVariable is a set SECKILL_* variable no setting reads, with the name it likely misspells (or "").
type UnknownVariable struct{ Name, Closest string }

// UnknownVariables finds the SECKILL_* variables of environ (KEY=value) the
// service does not read: a misspelt one would silently fall back to its default.
func UnknownVariables(environ []string) []UnknownVariable {
	var names []string
	for _, v := range ConfigVariables() {
		names = append(names, v.Name)
	}
	var out []UnknownVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "SECKILL_") || slices.Contains(names, name) || removedVariables[name] != "" || toolVariables[name] ||
			strings.HasPrefix(name, "SECKILL_TEST_") || strings.HasPrefix(name, "SECKILL_BENCH_") {
			continue
		}
		out = append(out, UnknownVariable{Name: name, Closest: closest(name, names)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WarnUnknownVariables logs one warning per unknown or removed variable.
func WarnUnknownVariables(log zerolog.Logger, environ []string) {
	for _, r := range RemovedVariables(environ) {
		log.Warn().Str("variable", r.Name).Str("instead", r.Instead).
			Msg(r.Name + " is no longer read (removed in this release); its default applies. Instead: " + r.Instead)
	}
	for _, u := range UnknownVariables(environ) {
		ev := log.Warn().Str("variable", u.Name)
		msg := "unknown variable " + u.Name + " is ignored"
		if u.Closest != "" {
			ev = ev.Str("did_you_mean", u.Closest)
			msg += "; did you mean " + u.Closest + "?"
		}
		ev.Msg(msg)
	}
}

// closest is the candidate nearest to name if near enough to be a typo: a
// distance of at most a quarter of the name after SECKILL_, and at least 2.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(2, (len(name)-len("SECKILL_"))/4)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance: an adjacent swap costs 1, as any other edit does.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// Variable is one setting as the environment names it.
type Variable struct{ Name, Default, Help string }

// ConfigVariables lists every variable with its default and help, read from Config's tags.
func ConfigVariables() []Variable {
	return variablesOf(reflect.TypeOf(Config{}))
}

func variablesOf(t reflect.Type) []Variable {
	vars := make([]Variable, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			vars = append(vars, variablesOf(f.Type)...)
			continue
		}
		if name := f.Tag.Get("env"); name != "" {
			vars = append(vars, Variable{Name: name, Default: f.Tag.Get("envDefault"), Help: f.Tag.Get("help")})
		}
	}
	return vars
}
