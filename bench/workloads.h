/* Workloads `snapcell bench` (bench.c) and the peer comparison's C worker (peers/worker.c) both
 * run, as one text; peers/worker.py and peers/worker.mjs carry the same. */
#ifndef SNAPCELL_BENCH_WORKLOADS_H
#define SNAPCELL_BENCH_WORKLOADS_H

/* A small json/re/datetime computation, and what it prints. */
#define BENCH_COMPUTE_CODE                                                                         \
	"import json, re, datetime\n"                                                              \
	"d = {'items': [{'id': i, 'name': 'item%d' % i, 'tags': ['a', 'b']} for i in "             \
	"range(50)]}\n"                                                                            \
	"s = json.dumps(d)\n"                                                                      \
	"back = json.loads(s)\n"                                                                   \
	"words = re.findall(r'item(\\d+)', s)\n"                                                   \
	"day = datetime.date(2024, 1, 1) + datetime.timedelta(days=len(words))\n"                  \
	"print(len(back['items']), len(words), day.isoformat())\n"
#define BENCH_COMPUTE_WANT "50 50 2024-02-20\n"

#endif
