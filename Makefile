# ofcd — optical fabric controller daemon.
#
#   make          build build/ofcd (the controller) and build/ofcd-agent (the host agent)
#   make run      set up, build and start the daemon on the embedded default with a demo topology
#   make test     set up, build and run every test (layering check, unit, unit under
#                 ASan+UBSan, integration)
#   make bench    run the benchmarks (see bench/RESULTS.md)
#   make fuzz     run each libFuzzer harness of tests/fuzz for FUZZ_SECONDS (default 60)
#   make config-doc  rewrite the configuration tables in docs/operations.md
#   make install  install binaries, systemd units and default configuration into DESTDIR/PREFIX
#   make clean    remove build/

PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
DESTDIR    ?=
CC         ?= cc
PYTHON     ?= /usr/bin/python3
B          := build
.DEFAULT_GOAL := all

# build/config.mk installs missing packages (packaging/deps.sh) and records the
# pkg-config flags; make rebuilds it before anything else and restarts.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(B)/config.mk
endif

$(B)/config.mk: packaging/deps.sh
	@mkdir -p $(B)
	@sh packaging/deps.sh
	@echo "PKG_CFLAGS := $$(pkg-config --cflags libevent jansson libmicrohttpd sqlite3 libsystemd inih libibverbs)" > $@.tmp
	@echo "PKG_LIBS := $$(pkg-config --libs libevent jansson libmicrohttpd sqlite3 libsystemd inih libibverbs) -lm" >> $@.tmp
	@echo "CMOCKA_LIBS := $$(pkg-config --libs cmocka)" >> $@.tmp
	@mv $@.tmp $@

WARN     := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS   ?= -O2 -g
SANFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
# The fuzzers (tests/fuzz): every layer again, built by clang with coverage
# instrumentation and the sanitizers into build/fuzz; libFuzzer's main is
# linked into the harnesses only.
FUZZ_CC     := clang
FUZZFLAGS   := -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60

# Layers, lowest first. Each is its own archive and sees only the headers of
# its own folder and of the layers below it (make check-deps checks the links):
#   planner/      pure C: its own headers, no package flags
#   ocs_drivers/  its own headers and libevent's
#   common/       what the daemon and the agent share (log, INI, JSON input, rdma)
#   daemon/       the controller; agent/ the host agent
EV_CFLAGS      := $(shell pkg-config --cflags libevent 2>/dev/null)
# The agent links only what it uses: no HTTP server, no SQLite.
AGENT_LIBS     := $(shell pkg-config --libs libevent jansson libsystemd inih libibverbs 2>/dev/null)
PLANNER_CPP    := -D_GNU_SOURCE -Iplanner
DRIVERS_CPP    := -D_GNU_SOURCE -Iocs_drivers $(EV_CFLAGS)
COMMON_CPP     := -D_GNU_SOURCE -Icommon
DAEMON_CPP     := -D_GNU_SOURCE -Idaemon -Icommon -Iplanner -Iocs_drivers -I$(B)/gen
AGENT_CPP      := -D_GNU_SOURCE -Iagent -Icommon
TEST_CPP       := -D_GNU_SOURCE -Idaemon -Iagent -Icommon -Iplanner -Iocs_drivers -I$(B)/gen

PLANNER_SRC := $(sort $(wildcard planner/*.c))
DRIVERS_SRC := $(sort $(wildcard ocs_drivers/*.c))
COMMON_SRC  := $(sort $(wildcard common/*.c))
DAEMON_SRC  := $(sort $(filter-out daemon/main.c,$(wildcard daemon/*.c))) $(B)/gen/migrations.c
AGENT_SRC   := $(sort $(filter-out agent/main.c,$(wildcard agent/*.c)))
UNIT_SRC    := $(sort $(wildcard tests/unit/test_*.c))
BENCH_SRC   := $(sort $(wildcard bench/*.c))
FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
MIGRATIONS  := $(sort $(wildcard schema/[0-9]*.sql))

obj = $(patsubst %.c,$(1)/obj/%.o,$(patsubst $(B)/%,%,$(2)))

# The archives, highest layer first (the order the linker needs).
LAYERS := daemon agent common ocs_drivers planner
daemon_SRC := $(DAEMON_SRC)
agent_SRC := $(AGENT_SRC)
common_SRC := $(COMMON_SRC)
ocs_drivers_SRC := $(DRIVERS_SRC)
planner_SRC := $(PLANNER_SRC)
LIBS     := $(foreach l,$(LAYERS),$(B)/lib$(l).a)
OFCD_ARCH  := $(foreach l,daemon common ocs_drivers planner,$(B)/lib$(l).a)
AGENT_ARCH := $(foreach l,agent common,$(B)/lib$(l).a)
LIBS_SAN := $(foreach l,$(LAYERS),$(B)/san/lib$(l).a)
UNIT_BIN     := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
UNIT_BIN_SAN := $(patsubst tests/unit/%.c,$(B)/san/tests/%,$(UNIT_SRC))
BENCH_BIN    := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))
LIBS_FUZZ    := $(foreach l,$(LAYERS),$(B)/fuzz/lib$(l).a)
FUZZ_BIN     := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))

.PHONY: all run test unit unit-san integration check-deps config-doc bench install clean format \
	fuzz fuzz-smoke
all: $(B)/ofcd $(B)/ofcd-agent

$(B)/gen/migrations.c: $(MIGRATIONS) schema/embed.sh
	@mkdir -p $(@D)
	sh schema/embed.sh $(MIGRATIONS) > $@

# One compile rule per layer and build flavour (plain, sanitized, fuzzing).
define layer_rules
$(B)/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(CC) $$(WARN) $(2) $(3) $$(CFLAGS) -MMD -MP -c $$< -o $$@
$(B)/san/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(CC) $$(WARN) $(2) $(3) $$(SANFLAGS) -MMD -MP -c $$< -o $$@
$(B)/fuzz/obj/$(1)/%.o: $(1)/%.c $(B)/config.mk
	@mkdir -p $$(@D)
	$$(FUZZ_CC) $$(WARN) $(2) $(3) $$(FUZZFLAGS) -MMD -MP -c $$< -o $$@
endef
$(eval $(call layer_rules,planner,$(PLANNER_CPP),))
$(eval $(call layer_rules,ocs_drivers,$(DRIVERS_CPP),))
$(eval $(call layer_rules,common,$(COMMON_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,daemon,$(DAEMON_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,agent,$(AGENT_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,tests/unit,$(TEST_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,bench,$(TEST_CPP),$$(PKG_CFLAGS)))
$(eval $(call layer_rules,tests/fuzz,$(TEST_CPP),$$(PKG_CFLAGS)))

$(B)/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(DAEMON_CPP) $(CFLAGS) -c $< -o $@

$(B)/san/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(DAEMON_CPP) $(SANFLAGS) -c $< -o $@

$(B)/fuzz/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(WARN) $(DAEMON_CPP) $(FUZZFLAGS) -c $< -o $@

define archive_rules
$(B)/lib$(1).a: $(call obj,$(B),$($(1)_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
$(B)/san/lib$(1).a: $(call obj,$(B)/san,$($(1)_SRC))
	@mkdir -p $$(@D)
	@rm -f $$@
	ar rcs $$@ $$^
$(B)/fuzz/lib$(1).a: $(call obj,$(B)/fuzz,$($(1)_SRC))
	@mkdir -p $$(@D)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call archive_rules,$(l))))

$(B)/ofcd: $(B)/obj/daemon/main.o $(OFCD_ARCH)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/ofcd-agent: $(B)/obj/agent/main.o $(AGENT_ARCH)
	$(CC) $(CFLAGS) -o $@ $^ $(AGENT_LIBS)

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/san/tests/%: $(B)/san/obj/tests/unit/%.o $(LIBS_SAN)
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/bench/%: $(B)/obj/bench/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/fuzz/fuzz_%: $(B)/fuzz/obj/tests/fuzz/fuzz_%.o $(LIBS_FUZZ)
	$(FUZZ_CC) $(FUZZFLAGS) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS)

run: $(B)/ofcd
	@mkdir -p var
	$(B)/ofcd --demo

unit: $(UNIT_BIN)
	@sh tests/run_unit.sh $(UNIT_BIN)

unit-san: $(UNIT_BIN_SAN)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh tests/run_unit.sh $(UNIT_BIN_SAN)

integration: $(B)/ofcd $(B)/ofcd-agent
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) -m pytest -p no:cacheprovider -q -rs tests/integration

# Fails on a link cycle between modules, a lower layer using a higher one, or
# SQL in the API layer (tools/check_deps.py).
check-deps: $(LIBS)
	$(PYTHON) tools/check_deps.py $(B)/obj

test: check-deps unit unit-san fuzz-smoke integration

# Each fuzzer over its committed corpus (seeds and the inputs of past crashes),
# then for FUZZ_SECONDS more; new inputs go to build/fuzz/corpus, crashes to
# build/fuzz/crashes (tests/fuzz/run.sh).
fuzz: $(FUZZ_BIN)
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

# The short run of make test: the committed corpus and two seconds of each.
fuzz-smoke: $(FUZZ_BIN)
	@rm -rf $(B)/fuzz/smoke
	@FUZZ_OUT=$(B)/fuzz/smoke sh tests/fuzz/run.sh 2 $(FUZZ_BIN)

# Rewrites the configuration tables in docs/operations.md from the programs'
# own (tests/integration/test_config_doc.py fails while they differ).
config-doc: $(B)/ofcd $(B)/ofcd-agent
	$(PYTHON) tools/config_doc.py $(B)

bench: $(B)/ofcd $(B)/ofcd-agent $(BENCH_BIN)
	sh bench/run.sh

install: $(B)/ofcd $(B)/ofcd-agent
	install -D -m 755 $(B)/ofcd $(DESTDIR)$(PREFIX)/bin/ofcd
	install -D -m 755 $(B)/ofcd-agent $(DESTDIR)$(PREFIX)/bin/ofcd-agent
	install -d $(DESTDIR)$(UNITDIR)
	for u in packaging/*.service; do \
		sed 's|@BINDIR@|$(PREFIX)/bin|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' $$u \
			> $(DESTDIR)$(UNITDIR)/$$(basename $$u); done
	install -D -m 644 packaging/ofcd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/ofcd.conf
	install -D -m 640 packaging/ofcd.ini $(DESTDIR)$(SYSCONFDIR)/ofcd/ofcd.ini
	@# The configuration holds secrets: readable by root and the ofcd group only.
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v systemd-sysusers >/dev/null; then \
		systemd-sysusers $(PREFIX)/lib/sysusers.d/ofcd.conf && \
		chgrp ofcd $(SYSCONFDIR)/ofcd/ofcd.ini; \
	else echo "after installing: systemd-sysusers && chgrp ofcd $(SYSCONFDIR)/ofcd/ofcd.ini"; fi
	install -D -m 644 schema/ofcd.example.ini $(DESTDIR)$(PREFIX)/share/doc/ofcd/ofcd.example.ini
	install -D -m 644 packaging/agent.ini $(DESTDIR)$(PREFIX)/share/doc/ofcd/agent.example.ini

format:
	clang-format -i $(wildcard daemon/*.[ch] agent/*.[ch] common/*.[ch] planner/*.[ch] \
		ocs_drivers/*.[ch] tests/unit/*.[ch] tests/fuzz/*.[ch] bench/*.[ch])

clean:
	rm -rf $(B)

.SECONDARY:
-include $(shell find $(B) -name '*.d' 2>/dev/null)
