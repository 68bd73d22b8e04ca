/* The record of a run's network attempts (src/net/record.c) without a gate: room for allowed
 * events whatever is refused, the refusals' share, repeats joined into one event's count. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "net/gate.h"
#include "net/record.h"
#include "util/util.h"

static struct snapcell_net_event refusal(const char *target)
{
	return (struct snapcell_net_event){.kind = SNAPCELL_NET_RESOLVE,
					   .target = target,
					   .rule = "not on this sandbox's allow list"};
}

static struct snapcell_net_event upload(void)
{
	return (struct snapcell_net_event){.kind = SNAPCELL_NET_REQUEST,
					   .allowed = true,
					   .target = "api.example.test",
					   .method = "POST",
					   .path = "/up",
					   .rule = "https://api.example.test/up",
					   .bytes_out = 1000};
}

Test(net_record, refusals_never_take_the_room_of_allowed_traffic)
{
	struct sc_net_record r = {.started_us = sc__now_us()};
	char name[64];
	for (int i = 0; i < 10050; i++) {
		snprintf(name, sizeof(name), "blocked%d.example", i % 3000);
		struct snapcell_net_event e = refusal(name);
		sc__net_record_add(&r, &e, false);
	}
	cr_expect_eq(r.n_events, SC_NET_RECORD_REFUSED);
	cr_assert(sc__net_record_reserve(&r));
	struct snapcell_net_event up = upload();
	cr_expect(sc__net_record_add(&r, &up, true));
	struct snapcell_result res = {0};
	sc__net_record_take(&r, &res);
	cr_assert_eq(res.n_net_events, SC_NET_RECORD_REFUSED + 1);
	uint64_t counted = 0;
	const struct snapcell_net_event *kept = NULL;
	for (size_t i = 0; i < res.n_net_events; i++) {
		if (res.net_events[i].allowed)
			kept = &res.net_events[i];
		else
			counted += res.net_events[i].count;
	}
	cr_assert(kept);
	cr_expect_str_eq(kept->path, "/up");
	cr_expect_eq(kept->count, 1);
	/* Names 0-999 were asked 4 times each; 1000-2999 came past the share. */
	cr_expect_eq(counted, 4000, "%llu", (unsigned long long)counted);
	cr_expect_eq(counted + res.n_net_events_dropped, 10050);
	sc__net_events_free(&res);
}

Test(net_record, allowed_events_are_capped_by_reservation)
{
	struct sc_net_record r = {.started_us = sc__now_us()};
	size_t held = 0;
	while (sc__net_record_reserve(&r))
		held++;
	cr_expect_eq(held, SC_NET_RECORD_ALLOWED);
	for (size_t i = 0; i < held; i++) {
		struct snapcell_net_event up = upload();
		cr_expect(sc__net_record_add(&r, &up, true));
	}
	cr_expect(!sc__net_record_reserve(&r));
	struct snapcell_result res = {0};
	sc__net_record_take(&r, &res);
	cr_expect_eq(res.n_net_events, SC_NET_RECORD_ALLOWED);
	cr_expect_eq(res.n_net_events_dropped, 0);
	sc__net_events_free(&res);
	cr_expect_eq(r.n_events, 0);
	cr_expect(sc__net_record_reserve(&r), "the record is empty after take");
	sc__net_record_take(&r, NULL);
}

Test(net_record, repeats_join_one_event_and_distinct_fields_do_not)
{
	struct sc_net_record r = {.started_us = sc__now_us()};
	struct snapcell_net_event a = refusal("evil.example"), b = a, c = a, ok = a;
	b.port = 443, b.kind = SNAPCELL_NET_CONNECT;
	c.rule = "another rule";
	ok.allowed = true, ok.rule = "*.example", ok.address = "198.51.100.2";
	for (int i = 0; i < 5; i++) {
		sc__net_record_add(&r, &a, false);
		sc__net_record_add(&r, &b, false);
		sc__net_record_add(&r, &c, false);
		cr_assert(sc__net_record_reserve(&r));
		sc__net_record_add(&r, &ok, true);
	}
	cr_expect_eq(r.n_reserved, 0);
	struct snapcell_result res = {0};
	sc__net_record_take(&r, &res);
	cr_assert_eq(res.n_net_events, 4);
	for (size_t i = 0; i < 4; i++)
		cr_expect_eq(res.net_events[i].count, 5, "%zu", i);
	/* Allowed events other than lookups are each their own. */
	struct snapcell_net_event up = upload();
	for (int i = 0; i < 3; i++) {
		cr_assert(sc__net_record_reserve(&r));
		sc__net_record_add(&r, &up, true);
	}
	sc__net_events_free(&res);
	sc__net_record_take(&r, &res);
	cr_expect_eq(res.n_net_events, 3);
	sc__net_events_free(&res);
}

/* Room reserved for traffic that then failed (a connection refused upstream) keeps its
 * refusal, even past the refusals' share. */
Test(net_record, reserved_room_keeps_a_refusal_past_the_share)
{
	struct sc_net_record r = {.started_us = sc__now_us()};
	char name[64];
	for (int i = 0; i < SC_NET_RECORD_REFUSED + 5; i++) {
		snprintf(name, sizeof(name), "blocked%d.example", i);
		struct snapcell_net_event e = refusal(name);
		sc__net_record_add(&r, &e, false);
	}
	cr_expect_eq(r.n_dropped, 5);
	struct snapcell_net_event failed = refusal("api.example.test");
	failed.kind = SNAPCELL_NET_CONNECT, failed.rule = "connect 198.51.100.2: refused";
	for (int i = 0; i < 2; i++) {
		cr_assert(sc__net_record_reserve(&r));
		cr_expect(sc__net_record_add(&r, &failed, true));
	}
	cr_expect_eq(r.n_events, SC_NET_RECORD_REFUSED + 2);
	sc__net_record_take(&r, NULL);
}
