/* The vocabulary every front end takes from the library: limit names, flag and kind names,
 * isolation levels, the execute_code schema and the run's JSON record, checked against the
 * names the front ends published before they came from here (they must not change). */
#include <jansson.h>

#include "helpers.h"

Test(vocab, limit_names_round_trip_and_keep_their_spelling)
{
	static const char *const want[SNAPCELL_LIMIT__COUNT] = {
		"wall_ms",	     "cpu_ms",
		"memory_bytes",	     "processes",
		"file_bytes",	     "tmp_bytes",
		"stdout_bytes",	     "stderr_bytes",
		"open_files",	     "output_files",
		"output_file_bytes", "output_total_bytes",
		"output_depth",	     "output_path_bytes",
		"net_connections",   "net_bytes",
		"net_connect_ms",    "net_idle_ms",
		"paused_runs",	     "pause_ms",
		"tool_calls",
	};
	for (int i = 0; i < SNAPCELL_LIMIT__COUNT; i++) {
		cr_expect_str_eq(snapcell_limit_name((enum snapcell_limit)i), want[i]);
		enum snapcell_limit back = SNAPCELL_LIMIT__COUNT;
		cr_expect_eq(snapcell_limit_from_name(want[i], &back, NULL), 0);
		cr_expect_eq(back, i);
	}
	cr_expect_null(snapcell_limit_name(SNAPCELL_LIMIT__COUNT));
	struct snapcell_error err = {0};
	enum snapcell_limit l;
	cr_expect_eq(snapcell_limit_from_name("wall", &l, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "'wall'"), "%s", err.message);
	cr_expect_eq(snapcell_limit_from_name(NULL, &l, NULL), SNAPCELL_E_INVAL);
}

Test(vocab, flag_names_name_single_known_flags_only)
{
	cr_expect_str_eq(snapcell_limit_flag_name(SNAPCELL_HIT_WALL), "wall");
	cr_expect_str_eq(snapcell_limit_flag_name(SNAPCELL_HIT_FILE_SIZE), "file_size");
	cr_expect_str_eq(snapcell_limit_flag_name(SNAPCELL_HIT_STDERR), "stderr");
	cr_expect_null(snapcell_limit_flag_name(SNAPCELL_HIT_WALL | SNAPCELL_HIT_CPU));
	cr_expect_null(snapcell_limit_flag_name(0));
	cr_expect_null(snapcell_limit_flag_name(SNAPCELL_HIT_STDERR << 1));
	cr_expect_str_eq(snapcell_output_limit_flag_name(SNAPCELL_OUTPUT_HIT_FILES), "files");
	cr_expect_str_eq(snapcell_output_limit_flag_name(SNAPCELL_OUTPUT_HIT_WALK), "walk");
	cr_expect_null(snapcell_output_limit_flag_name(SNAPCELL_OUTPUT_HIT_WALK << 1));
	cr_expect_str_eq(snapcell_net_hit_name(SNAPCELL_NET_HIT_CONNECTIONS), "connections");
	cr_expect_str_eq(snapcell_net_hit_name(SNAPCELL_NET_HIT_EVENTS), "events");
	cr_expect_null(snapcell_net_hit_name(SNAPCELL_NET_HIT_EVENTS << 1));
	cr_expect_str_eq(snapcell_net_kind_name(SNAPCELL_NET_RESOLVE), "resolve");
	cr_expect_str_eq(snapcell_net_kind_name(SNAPCELL_NET_REQUEST), "request");
	cr_expect_null(snapcell_net_kind_name(SNAPCELL_NET_REQUEST + 1));
	cr_expect_null(snapcell_net_kind_name((enum snapcell_net_kind) - 1));
}

Test(vocab, isolation_levels_round_trip)
{
	for (int l = SNAPCELL_ISOLATION_NONE; l <= SNAPCELL_ISOLATION_CGROUPS; l++) {
		enum snapcell_isolation back = SNAPCELL_ISOLATION_CGROUPS + 1;
		cr_expect_eq(snapcell_isolation_from_name(snapcell_isolation_name(l), &back), 0);
		cr_expect_eq(back, l);
	}
	enum snapcell_isolation level;
	cr_expect_eq(snapcell_isolation_from_name("namespace", &level), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_isolation_from_name(NULL, &level), SNAPCELL_E_INVAL);
}

Test(vocab, execute_code_schema_is_json_requiring_code)
{
	for (unsigned flags = 0; flags < 4; flags++) {
		const char *text = snapcell_execute_code_schema(flags);
		cr_assert_not_null(text, "flags %u", flags);
		json_error_t jerr;
		json_t *s = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
		cr_assert_not_null(s, "flags %u: %s", flags, jerr.text);
		json_t *props = json_object_get(s, "properties");
		cr_expect_str_eq(json_string_value(json_object_get(s, "type")), "object");
		cr_expect_str_eq(
			json_string_value(json_array_get(json_object_get(s, "required"), 0)),
			"code");
		cr_expect_eq(json_array_size(json_object_get(s, "required")), 1);
		cr_expect(json_is_false(json_object_get(s, "additionalProperties")));
		const char *what = json_string_value(
			json_object_get(json_object_get(props, "code"), "description"));
		cr_assert_not_null(what);
		cr_expect(strstr(what, (flags & SNAPCELL_SCHEMA_STATEFUL) ? "persist" : "fresh"),
			  "flags %u: %s", flags, what);
		cr_expect_eq(json_object_get(props, "session") != NULL,
			     (flags & SNAPCELL_SCHEMA_SESSION) != 0, "flags %u", flags);
		cr_expect_eq(json_object_size(props), (flags & SNAPCELL_SCHEMA_SESSION) ? 2 : 1);
		json_decref(s);
	}
	cr_expect_null(snapcell_execute_code_schema(4));
}

static json_t *record_of(const struct snapcell_result *res, unsigned flags)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_result_to_json(res, flags, &text, &err), 0, "%s", err.message);
	cr_assert_not_null(text);
	json_error_t jerr;
	json_t *j = json_loads(text, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
	cr_assert_not_null(j, "%s: %s", jerr.text, text);
	free(text);
	return j;
}

Test(vocab, result_json_names_fields_and_flags_as_the_front_ends_did)
{
	char out[] = "a\0b\xff";
	uint8_t bytes[] = {'h', 'i', '!'};
	struct snapcell_artifact art = {"r.txt", "text/plain", 3, bytes};
	struct snapcell_net_event ev = {.kind = SNAPCELL_NET_CONNECT,
					.allowed = false,
					.target = "evil.example",
					.port = 443,
					.rule = "not allowed",
					.count = 2};
	struct snapcell_tool_call call = {.name = "add", .args_bytes = 9, .ok = true};
	struct snapcell_result res = {
		.status = SNAPCELL_STATUS_KILLED,
		.term_signal = 9,
		.limits_hit = SNAPCELL_HIT_MEMORY | SNAPCELL_HIT_TMP,
		.stdout_buf = out,
		.stdout_len = sizeof(out) - 1,
		.stderr_buf = "",
		.isolation = SNAPCELL_ISOLATION_NAMESPACES,
		.artifacts = &art,
		.n_artifacts = 1,
		.tool_calls = &call,
		.n_tool_calls = 1,
		.net_events = &ev,
		.n_net_events = 1,
		.net_limits_hit = SNAPCELL_NET_HIT_BYTES,
	};
	json_t *j = record_of(&res, 0);
	static const char *const keys[] = {
		"status",
		"exit_code",
		"signal",
		"limits_hit",
		"stdout",
		"stdout_truncated",
		"stderr",
		"stderr_truncated",
		"wall_us",
		"cpu_us",
		"peak_memory_bytes",
		"isolation",
		"peak_rss_bytes",
		"decisions",
		"value",
		"value_absent",
		"artifacts",
		"skipped",
		"skipped_count",
		"output_caps_hit",
		"tool_calls",
		"network_events",
		"network_events_dropped",
		"network_limits_hit",
	};
	cr_expect_eq(json_object_size(j), sizeof(keys) / sizeof(keys[0]));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_expect_not_null(json_object_get(j, keys[i]), "no %s", keys[i]);
	cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "killed");
	cr_expect_eq(json_integer_value(json_object_get(j, "signal")), 9);
	cr_expect_str_eq(json_string_value(json_object_get(j, "isolation")), "namespaces");
	json_t *hits = json_object_get(j, "limits_hit");
	cr_expect_eq(json_array_size(hits), 2);
	cr_expect_str_eq(json_string_value(json_array_get(hits, 0)), "memory");
	cr_expect_str_eq(json_string_value(json_array_get(hits, 1)), "tmp");
	json_t *so = json_object_get(j, "stdout");
	cr_expect_eq(json_string_length(so), 6); /* a, NUL, b, U+FFFD in three bytes */
	cr_expect_eq(memcmp(json_string_value(so), "a\0b\xef\xbf\xbd", 6), 0);
	json_t *a = json_array_get(json_object_get(j, "artifacts"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(a, "path")), "/output/r.txt");
	cr_expect_null(json_object_get(a, "base64"));
	json_t *e = json_array_get(json_object_get(j, "network_events"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(e, "kind")), "connect");
	cr_expect_eq(json_integer_value(json_object_get(e, "count")), 2);
	cr_expect_str_eq(
		json_string_value(json_array_get(json_object_get(j, "network_limits_hit"), 0)),
		"bytes");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(j, "tool_calls"), 0), "name")),
			 "add");
	json_decref(j);

	j = record_of(&res, SNAPCELL_JSON_ARTIFACT_DATA);
	a = json_array_get(json_object_get(j, "artifacts"), 0);
	cr_expect_str_eq(json_string_value(json_object_get(a, "base64")), "aGkh");
	json_decref(j);
}

Test(vocab, result_json_refuses_bad_arguments)
{
	struct snapcell_result res = {0};
	char *text = NULL;
	cr_expect_eq(snapcell_result_to_json(NULL, 0, &text, NULL), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_result_to_json(&res, 0, NULL, NULL), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_result_to_json(&res, 1u << 7, &text, NULL), SNAPCELL_E_INVAL);
	cr_expect_null(text);
}
