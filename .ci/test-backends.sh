#!/usr/bin/env bash
# Prints the one line `make test` ends with: which suites ran on which
# backends. Without the variables below the real-backend tests skip (each
# with a t.Skip message that `go test` hides unless -v), so a green run on a
# laptop says less than a green run in CI; this line says how much less.
redis=${SECKILL_TEST_REDIS_URL:+set}
mysql=${SECKILL_TEST_MYSQL_DSN:+set}
cluster=${SECKILL_TEST_REDIS_CLUSTER_ADDRS:+set}

ran=("Redis suites on miniredis") skipped=()
if [[ $redis ]]; then ran[0]+=" + real Redis"; else skipped+=("real Redis (SECKILL_TEST_REDIS_URL)"); fi
if [[ $cluster ]]; then ran[0]+=" + Redis Cluster"; else skipped+=("Redis Cluster (SECKILL_TEST_REDIS_CLUSTER_ADDRS)"); fi
ran+=("SQL suites on SQLite")
if [[ $mysql ]]; then ran[1]+=" + MySQL"; else skipped+=("MySQL (SECKILL_TEST_MYSQL_DSN)"); fi
if [[ $redis && $mysql ]]; then
	ran+=("component, e2e and bench smoke on real Redis + MySQL")
else
	skipped+=("component, e2e and bench smoke (need both SECKILL_TEST_REDIS_URL and SECKILL_TEST_MYSQL_DSN)")
fi

line="backends: ran $(IFS=';'; echo "${ran[*]}" | sed 's/;/; /g')"
if ((${#skipped[@]})); then
	line+=". SKIPPED: $(IFS=';'; echo "${skipped[*]}" | sed 's/;/; /g')"
else
	line+="; nothing skipped"
fi
echo "$line"
