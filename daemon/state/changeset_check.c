/*
 * A changeset walked before SQLite applies it: SQLite's session code trusts
 * its input (a corrupted length sends its iterator through gigabytes, or
 * round forever), and a change of the replicated log is bytes from etcd.
 * The format (sqlite.org/sessionintro.html, "changeset format"): sections,
 * each 'T', the number of columns (a varint), one primary-key flag byte per
 * column and the table's name with its NUL; then records, each an operation
 * byte (INSERT 18, DELETE 9, UPDATE 23), an "indirect" byte and its values
 * (DELETE: the old row, INSERT: the new, UPDATE: old then new), each value a
 * type byte (0 undefined, in an UPDATE only; 1 integer and 2 real, 8 bytes;
 * 3 text and 4 blob, a varint length and the bytes; 5 NULL).
 */
#include "store_changes.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "store_sql.h"

/* A varint of SQLite's: 7 bits a byte, big end first, the ninth byte whole. */
static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	*v = 0;
	for (int i = 0; i < 9; i++) {
		if (*p == end)
			return false;
		unsigned char b = *(*p)++;
		if (i == 8) {
			*v = (*v << 8) | b;
			return true;
		}
		*v = (*v << 7) | (b & 0x7f);
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/*
 * One row of ncol values. Undefined values are allowed in an UPDATE only,
 * never in a primary key column of its old row (key_defined: SQLite reads
 * them without looking).
 */
static bool record(const unsigned char **p, const unsigned char *end, uint64_t ncol, bool update,
                   const unsigned char *pk, bool key_defined)
{
	for (uint64_t c = 0; c < ncol; c++) {
		if (*p == end)
			return false;
		unsigned char type = *(*p)++;
		uint64_t n;
		switch (type) {
		case 0:
			if (!update || (key_defined && pk[c]))
				return false;
			break;
		case 1:
		case 2:
			if ((size_t)(end - *p) < 8)
				return false;
			*p += 8;
			break;
		case 3:
		case 4:
			if (!varint(p, end, &n) || n > (uint64_t)(end - *p))
				return false;
			*p += n;
			break;
		case 5:
			break;
		default:
			return false;
		}
	}
	return true;
}

int store_changeset_check(struct store *s, const void *data, size_t len, char *why, size_t whylen)
{
	const unsigned char *p = data, *end = p + len;
	uint64_t ncol = 0;
	char table[64] = "";
	const unsigned char *pk = NULL;
	if (len == 0)
		return 0; /* nothing changed: SQLite takes that */
	while (p < end) {
		if (*p == 'T') {
			p++;
			const unsigned char *name;
			const unsigned char *flags;
			if (!varint(&p, end, &ncol) || ncol == 0 || ncol > STORE_MAX_COLUMNS ||
			    ncol > (uint64_t)(end - p))
				goto bad_header;
			flags = p;
			p += ncol;
			name = p;
			while (p < end && *p)
				p++;
			if (p == end || (size_t)(p - name) >= sizeof(table))
				goto bad_header;
			memcpy(table, name, (size_t)(p - name) + 1);
			p++;
			const struct store_table *t = store_table(s, table);
			int have = t ? t->ncol : 0;
			if ((uint64_t)have != ncol || memcmp(flags, t->pk, (size_t)ncol) != 0) {
				snprintf(why, whylen,
				         "table %s: %llu columns or its key differ from this "
				         "store's (%d)",
				         table, (unsigned long long)ncol, have);
				return -EPROTO;
			}
			pk = t->pk;
			continue;
		}
		if (!table[0])
			goto bad_header;
		unsigned char op = *p++;
		if ((op != 18 && op != 9 && op != 23) || p == end || *p > 1)
			goto bad_record;
		p++;
		if (!record(&p, end, ncol, op == 23, pk, true) ||
		    (op == 23 && !record(&p, end, ncol, true, pk, false)))
			goto bad_record;
	}
	return 0;
bad_header:
	snprintf(why, whylen, "a malformed table header at byte %zu",
	         (size_t)(p - (const unsigned char *)data));
	return -EPROTO;
bad_record:
	snprintf(why, whylen, "table %s: a malformed row at byte %zu", table,
	         (size_t)(p - (const unsigned char *)data));
	return -EPROTO;
}
