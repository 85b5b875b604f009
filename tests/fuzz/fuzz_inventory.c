/*
 * The RDMA inventory JSON as an agent sends it (PUT /v1/servers/{name}/
 * inventory) and as the recorded source reads it from a file, and the event
 * script of that source. Input: the JSON text, then optionally a NUL byte and
 * an event script played against the parsed inventory.
 *
 * The text is parsed as http.c parses a body, then by rdma_inventory_from_json
 * in both forms (plain and RDMA_JSON_REPORT). A refusal must name its reason
 * and leave the inventory empty; an accepted inventory must survive a copy and
 * a round trip: printed and parsed again it prints the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "rdma.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_LVL_ERROR);
	return 0;
}

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_inventory: %s\n", what);
		abort();
	}
}

static void script(const char *text, const struct rdma_inventory *inv)
{
	struct rdma_script_event *ev;
	size_t n;
	char err[256] = "";

	if (rdma_script_parse(text, "fuzz.events", inv, &ev, &n, err, sizeof(err)) < 0) {
		check(err[0] && !ev && !n, "a refused script without a reason, or with events");
		return;
	}
	for (size_t i = 1; i < n; i++)
		check(ev[i].at_ms >= ev[i - 1].at_ms, "script events out of order");
	for (size_t i = 0; i < n; i++)
		check(rdma_inventory_device(inv, ev[i].device),
		      "script event on a device not held");
	free(ev);
}

/* Parsed, printed, parsed again: the second print equals the first. */
static void round_trip(const struct rdma_inventory *inv, unsigned flags)
{
	struct rdma_inventory again, copy;
	char field[192] = "", err[256] = "";
	unsigned interval;
	json_t *a = rdma_inventory_to_json(inv, flags);

	check(a != NULL, "print failed");
	if (flags & RDMA_JSON_REPORT)
		json_object_set_new(a, "interval", json_integer(10));
	int rc = rdma_inventory_from_json(a, flags, &again, &interval, field, sizeof(field), err,
	                                  sizeof(err));
	if (rc < 0)
		fprintf(stderr, "fuzz_inventory: %s: %s\n", field, err);
	check(rc == 0, "a printed inventory is refused");
	json_t *b = rdma_inventory_to_json(&again, flags);
	if (flags & RDMA_JSON_REPORT)
		json_object_set_new(b, "interval", json_integer(10));
	check(json_equal(a, b), "a printed inventory prints differently once parsed again");
	check(rdma_inventory_copy(&copy, &again) == 0, "copy failed");
	json_t *c = rdma_inventory_to_json(&copy, flags);
	if (flags & RDMA_JSON_REPORT)
		json_object_set_new(c, "interval", json_integer(10));
	check(json_equal(a, c), "a copy prints differently");
	json_decref(a);
	json_decref(b);
	json_decref(c);
	rdma_inventory_free(&copy);
	rdma_inventory_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned forms[] = { 0, RDMA_JSON_REPORT };
	const uint8_t *nul = memchr(data, '\0', size);
	size_t json_len = nul ? (size_t)(nul - data) : size;
	char *events = NULL;
	json_error_t jerr;

	if (nul) {
		events = malloc(size - json_len);
		if (!events)
			return 0;
		memcpy(events, nul + 1, size - json_len - 1);
		events[size - json_len - 1] = '\0';
	}
	json_t *j = json_loadb((const char *)data, json_len,
	                       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	for (size_t f = 0; j && f < sizeof(forms) / sizeof(forms[0]); f++) {
		struct rdma_inventory inv;
		char field[192] = "", err[256] = "";
		unsigned interval = 0;

		if (rdma_inventory_from_json(j, forms[f], &inv, &interval, field, sizeof(field),
		                             err, sizeof(err)) < 0) {
			check(err[0] && !inv.ndevices && !inv.devices,
			      "a refusal without a reason, or with devices left");
			continue;
		}
		check(!(forms[f] & RDMA_JSON_REPORT) || (interval >= 1 && interval <= 86400),
		      "interval out of range");
		check(inv.ndevices <= RDMA_MAX_DEVICES, "too many devices");
		round_trip(&inv, forms[f]);
		if (events)
			script(events, &inv);
		rdma_inventory_free(&inv);
	}
	json_decref(j);
	free(events);
	return 0;
}
