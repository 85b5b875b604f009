# ofcd — optical fabric controller daemon.
#
#   make          build build/ofcd
#   make run      set up, build and start the daemon on the embedded default with a demo topology
#   make test     set up, build and run every test (unit, unit under ASan+UBSan, integration)
#   make bench    run the benchmarks (see bench/RESULTS.md)
#   make install  install binary, systemd units and default configuration into DESTDIR/PREFIX
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
CPPFLAGS := -D_GNU_SOURCE -Idaemon -Iplanner -Iocs_drivers -I$(B)/gen
CFLAGS   ?= -O2 -g
SANFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

LIB_SRC   := $(sort $(filter-out daemon/main.c,$(wildcard daemon/*.c)) $(wildcard planner/*.c) \
               $(wildcard ocs_drivers/*.c)) $(B)/gen/migrations.c
UNIT_SRC  := $(sort $(wildcard tests/unit/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/*.c))
MIGRATIONS := $(sort $(wildcard schema/[0-9]*.sql))

obj = $(patsubst %.c,$(1)/obj/%.o,$(patsubst $(B)/%,%,$(2)))

LIB_OBJ      := $(call obj,$(B),$(LIB_SRC))
LIB_OBJ_SAN  := $(call obj,$(B)/san,$(LIB_SRC))
UNIT_BIN     := $(patsubst tests/unit/%.c,$(B)/tests/%,$(UNIT_SRC))
UNIT_BIN_SAN := $(patsubst tests/unit/%.c,$(B)/san/tests/%,$(UNIT_SRC))
BENCH_BIN    := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))

.PHONY: all run test unit unit-san integration bench install clean format
all: $(B)/ofcd

$(B)/gen/migrations.c: $(MIGRATIONS) schema/embed.sh
	@mkdir -p $(@D)
	sh schema/embed.sh $(MIGRATIONS) > $@

$(B)/obj/%.o: %.c $(B)/config.mk
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(B)/san/obj/%.o: %.c $(B)/config.mk
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(PKG_CFLAGS) $(SANFLAGS) -MMD -MP -c $< -o $@

$(B)/san/obj/gen/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(SANFLAGS) -c $< -o $@

$(B)/libofcd.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/san/libofcd.a: $(LIB_OBJ_SAN)
	@rm -f $@
	ar rcs $@ $^

$(B)/ofcd: $(B)/obj/daemon/main.o $(B)/libofcd.a
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(B)/libofcd.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/san/tests/%: $(B)/san/obj/tests/unit/%.o $(B)/san/libofcd.a
	@mkdir -p $(@D)
	$(CC) $(SANFLAGS) -o $@ $^ $(PKG_LIBS) $(CMOCKA_LIBS)

$(B)/bench/%: $(B)/obj/bench/%.o $(B)/libofcd.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS)

run: $(B)/ofcd
	@mkdir -p var
	$(B)/ofcd --demo

unit: $(UNIT_BIN)
	@sh tests/run_unit.sh $(UNIT_BIN)

unit-san: $(UNIT_BIN_SAN)
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 sh tests/run_unit.sh $(UNIT_BIN_SAN)

integration: $(B)/ofcd
	OFCD_BIN=$(abspath $(B)/ofcd) $(PYTHON) -m pytest -p no:cacheprovider -q -rs tests/integration

test: unit unit-san integration

bench: $(B)/ofcd $(BENCH_BIN)
	sh bench/run.sh

install: $(B)/ofcd
	install -D -m 755 $(B)/ofcd $(DESTDIR)$(PREFIX)/bin/ofcd
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
	clang-format -i $(wildcard daemon/*.[ch] planner/*.[ch] ocs_drivers/*.[ch] tests/unit/*.[ch] bench/*.[ch])

clean:
	rm -rf $(B)

.SECONDARY:
-include $(shell find $(B) -name '*.d' 2>/dev/null)
