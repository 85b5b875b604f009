#include "yaml.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Words a YAML 1.1 reader (PyYAML, libyaml's users) takes for a boolean or null. */
static const char *const reserved[] = {
	"y", "n", "yes", "no", "true", "false", "on", "off", "null"
};

static bool plain_ok(const char *s, size_t len)
{
	if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == '/'))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!isalnum(c) && !(c && strchr("._/-", c)))
			return false;
	}
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		if (strlen(reserved[i]) == len && strncasecmp(s, reserved[i], len) == 0)
			return false;
	}
	return true;
}

/* The code point of the UTF-8 sequence at s (jansson keeps strings valid); *n gets its length. */
static unsigned long utf8_at(const unsigned char *s, size_t *n)
{
	if (s[0] < 0x80) {
		*n = 1;
		return s[0];
	}
	size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	unsigned long cp = s[0] & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++)
		cp = (cp << 6) | (s[i] & 0x3f);
	*n = len;
	return cp;
}

/*
 * A double-quoted scalar. Besides the C0 controls, the characters YAML reads
 * as line breaks or would drop (C1 controls, U+2028, U+2029, the byte-order
 * mark) are escaped: inside quotes a raw line break folds into a space.
 */
static void quoted(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len;) {
		size_t n;
		unsigned long cp = utf8_at((const unsigned char *)s + i, &n);
		const char *esc = cp == '"'    ? "\\\""
		                  : cp == '\\' ? "\\\\"
		                  : cp == '\n' ? "\\n"
		                  : cp == '\t' ? "\\t"
		                  : cp == '\r' ? "\\r"
		                               : NULL;
		if (esc)
			fputs(esc, f);
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 || cp == 0x2029 ||
		         cp == 0xfeff)
			fprintf(f, "\\u%04lx", cp);
		else
			fwrite(s + i, 1, n, f);
		i += n;
	}
	fputc('"', f);
}

static void string(FILE *f, const char *s, size_t len)
{
	if (plain_ok(s, len))
		fwrite(s, 1, len, f);
	else
		quoted(f, s, len);
}

static void scalar(FILE *f, const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		string(f, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: {
		/* YAML 1.1 floats need a dot and a signed exponent: jansson's 1e20 is 1.0e+20. */
		char *s = json_dumps(v, JSON_ENCODE_ANY);
		char *e = s ? strchr(s, 'e') : NULL;
		if (e) {
			int dot = memchr(s, '.', (size_t)(e - s)) != NULL;
			int sign = e[1] == '-' || e[1] == '+';
			fprintf(f, "%.*s%s%s%s", (int)(e - s), s, dot ? "" : ".0",
			        sign ? "e" : "e+", e + 1);
		} else {
			fputs(s ? s : ".nan", f);
		}
		free(s);
		break;
	}
	case JSON_TRUE:
		fputs("true", f);
		break;
	case JSON_FALSE:
		fputs("false", f);
		break;
	case JSON_NULL:
		fputs("null", f);
		break;
	case JSON_OBJECT:
		fputs("{}", f);
		break;
	case JSON_ARRAY:
		fputs("[]", f);
		break;
	}
}

static bool is_block(const json_t *v)
{
	return (json_is_object(v) && json_object_size(v)) ||
	       (json_is_array(v) && json_array_size(v));
}

/*
 * A non-empty object or array, each line indented by indent spaces; when
 * inline_first, the cursor already stands after "- " and the first line
 * goes there.
 */
static void block(FILE *f, const json_t *v, int indent, bool inline_first)
{
	const char *key;
	const json_t *e;
	size_t i = 0;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, key, e)
		{
			if (i++ || !inline_first)
				fprintf(f, "%*s", indent, "");
			string(f, key, strlen(key));
			fputc(':', f);
			if (is_block(e)) {
				fputc('\n', f);
				block(f, e, indent + 2, false);
			} else {
				fputc(' ', f);
				scalar(f, e);
				fputc('\n', f);
			}
		}
		return;
	}
	json_array_foreach(v, i, e)
	{
		if (i || !inline_first)
			fprintf(f, "%*s", indent, "");
		fputs("- ", f);
		if (is_block(e)) {
			block(f, e, indent + 2, true);
		} else {
			scalar(f, e);
			fputc('\n', f);
		}
	}
}

void yaml_print(FILE *f, const json_t *v)
{
	if (is_block(v)) {
		block(f, v, 0, false);
	} else {
		scalar(f, v ? v : json_null());
		fputc('\n', f);
	}
}
