/*
 * hwprobe-file.c — reads a machine file: a small JSON document describing a
 * machine (CPU, cores, RAM, GPUs) that stands in for the hardware probe in
 * tests and in "what if I had two 4090s" questions (MOEDESK_MACHINE=FILE).
 *
 * Not a general JSON parser: it reads exactly the schema documented above
 * moe_machine_parse in moe.h, driven by that schema, so an unknown or
 * repeated key, a wrong type or a value out of range is an error naming the
 * key path and byte offset. Everything is bounded: the text is read through
 * a cursor that never passes `end`, strings are copied into fixed buffers
 * (too long is an error, not a truncation), numbers have at most 40
 * characters, nesting is at most 3 deep (object > gpus array > GPU object)
 * and there are at most MOE_HW_MAX_GPUS GPUs. Nothing is allocated, so a
 * fuzzer can throw any bytes at it.
 */
#include "moe.h"
#include "platform.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct mf_cursor {
    const char *start; /* first byte of the text                        */
    const char *p;     /* next byte to read; start <= p <= end          */
    const char *end;   /* one past the last byte                        */
    const char *src;   /* name for messages                             */
    moe_err    *err;
} mf_cursor;

static size_t mf_offset(const mf_cursor *c)
{
    return (size_t)(c->p - c->start);
}

static moe_status mf_fail(mf_cursor *c, const char *what, const char *key)
{
    return moe_fail(c->err, MOE_ERR_FORMAT, "%s: byte %zu: %s%s%s", c->src, mf_offset(c), what,
                    key ? " " : "", key ? key : "");
}

static void mf_skip_ws(mf_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Consumes `ch` after optional whitespace; false (nothing consumed) if the
 * next byte is something else. */
static bool mf_accept(mf_cursor *c, char ch)
{
    mf_skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static moe_status mf_expect(mf_cursor *c, char ch, const char *key)
{
    if (mf_accept(c, ch))
        return MOE_OK;
    char what[32];
    snprintf(what, sizeof what, "expected '%c'%s", ch, key ? " in" : "");
    return mf_fail(c, what, key);
}

static int mf_hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Appends the UTF-8 form of code point `cp` (< 0x10000) to buf[*n]. */
static bool mf_put_utf8(char *buf, size_t cap, size_t *n, unsigned cp)
{
    char tmp[3];
    size_t k;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    }
    if (*n + k >= cap)
        return false;
    memcpy(buf + *n, tmp, k);
    *n += k;
    return true;
}

/* Reads a JSON string into buf (NUL-terminated, at most cap-1 bytes).
 * Surrogate escapes (\uD800-\uDFFF) are replaced by U+FFFD: names in a
 * machine file have no use for them. Raw control characters are errors. */
static moe_status mf_string(mf_cursor *c, char *buf, size_t cap, const char *key)
{
    if (!mf_accept(c, '"'))
        return mf_fail(c, "expected a string for", key);
    size_t n = 0;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p++;
        if (ch < 0x20)
            return mf_fail(c, "control character in string", key);
        if (ch != '\\') {
            if (n + 1 >= cap)
                return mf_fail(c, "string too long for", key);
            buf[n++] = (char)ch;
            continue;
        }
        if (c->p >= c->end)
            break;
        char esc = *c->p++;
        char plain = 0;
        switch (esc) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
            if (c->end - c->p < 4)
                return mf_fail(c, "truncated \\u escape in", key);
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                int h = mf_hex(c->p[i]);
                if (h < 0)
                    return mf_fail(c, "bad \\u escape in", key);
                cp = cp * 16 + (unsigned)h;
            }
            c->p += 4;
            if (cp >= 0xD800 && cp <= 0xDFFF)
                cp = 0xFFFD;
            if (cp == 0)
                return mf_fail(c, "NUL character in", key);
            if (!mf_put_utf8(buf, cap, &n, cp))
                return mf_fail(c, "string too long for", key);
            continue;
        }
        default:
            return mf_fail(c, "bad escape in", key);
        }
        if (n + 1 >= cap)
            return mf_fail(c, "string too long for", key);
        buf[n++] = plain;
    }
    if (c->p >= c->end)
        return mf_fail(c, "unterminated string for", key);
    c->p++; /* closing quote */
    buf[n] = '\0';
    return MOE_OK;
}

/* A JSON number (optionally fractional, with exponent), read by hand so the
 * C locale's decimal point does not matter. At most 40 characters. */
static moe_status mf_number(mf_cursor *c, double *out, const char *key)
{
    mf_skip_ws(c);
    const char *q = c->p;
    double sign = 1.0, v = 0.0;
    if (q < c->end && *q == '-') {
        sign = -1.0;
        q++;
    }
    if (q >= c->end || *q < '0' || *q > '9')
        return mf_fail(c, "expected a number for", key);
    while (q < c->end && *q >= '0' && *q <= '9')
        v = v * 10.0 + (*q++ - '0');
    if (q < c->end && *q == '.') {
        q++;
        if (q >= c->end || *q < '0' || *q > '9')
            return mf_fail(c, "bad number for", key);
        double scale = 0.1;
        while (q < c->end && *q >= '0' && *q <= '9') {
            v += (*q++ - '0') * scale;
            scale *= 0.1;
        }
    }
    if (q < c->end && (*q == 'e' || *q == 'E')) {
        q++;
        int esign = 1, e = 0;
        if (q < c->end && (*q == '+' || *q == '-'))
            esign = *q++ == '-' ? -1 : 1;
        if (q >= c->end || *q < '0' || *q > '9')
            return mf_fail(c, "bad exponent for", key);
        while (q < c->end && *q >= '0' && *q <= '9') {
            if (e < 1000)
                e = e * 10 + (*q - '0');
            q++;
        }
        if (e > 30)
            return mf_fail(c, "number out of range for", key);
        for (int i = 0; i < e; i++)
            v = esign > 0 ? v * 10.0 : v / 10.0;
    }
    if (q - c->p > 40)
        return mf_fail(c, "number too long for", key);
    c->p = q;
    *out = sign * v;
    return MOE_OK;
}

static moe_status mf_int(mf_cursor *c, int64_t lo, int64_t hi, int64_t *out, const char *key)
{
    double v;
    moe_status st = mf_number(c, &v, key);
    if (st != MOE_OK)
        return st;
    /* range first: converting an out-of-range double is undefined */
    if (!(v >= (double)lo && v <= (double)hi) || v != (double)(int64_t)v) {
        char what[96];
        snprintf(what, sizeof what, "expected an integer %lld..%lld for", (long long)lo, (long long)hi);
        return mf_fail(c, what, key);
    }
    *out = (int64_t)v;
    return MOE_OK;
}

static moe_status mf_bool(mf_cursor *c, bool *out, const char *key)
{
    mf_skip_ws(c);
    if (c->end - c->p >= 4 && memcmp(c->p, "true", 4) == 0) {
        c->p += 4;
        *out = true;
        return MOE_OK;
    }
    if (c->end - c->p >= 5 && memcmp(c->p, "false", 5) == 0) {
        c->p += 5;
        *out = false;
        return MOE_OK;
    }
    return mf_fail(c, "expected true or false for", key);
}

/* A size: a non-negative byte count, or "<number> <unit>". Limit 2^60. */
static moe_status mf_size(mf_cursor *c, uint64_t *out, const char *key)
{
    static const struct { const char *unit; double mult; } units[] = {
        {"B", 1.0},          {"KB", 1e3},           {"MB", 1e6},
        {"GB", 1e9},         {"TB", 1e12},          {"KiB", 1024.0},
        {"MiB", 1048576.0},  {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    const double limit = 1152921504606846976.0; /* 2^60 */
    double v;
    mf_skip_ws(c);
    if (c->p < c->end && *c->p == '"') {
        char text[48];
        moe_status st = mf_string(c, text, sizeof text, key);
        if (st != MOE_OK)
            return st;
        mf_cursor inner = {text, text, text + strlen(text), c->src, c->err};
        if ((st = mf_number(&inner, &v, key)) != MOE_OK)
            return mf_fail(c, "expected a size like \"24 GiB\" for", key);
        mf_skip_ws(&inner);
        size_t rest = (size_t)(inner.end - inner.p);
        double mult = 0.0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (rest == strlen(units[i].unit) && memcmp(inner.p, units[i].unit, rest) == 0)
                mult = units[i].mult;
        if (mult == 0.0)
            return mf_fail(c, "unknown size unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB) for", key);
        v *= mult;
    } else {
        moe_status st = mf_number(c, &v, key);
        if (st != MOE_OK)
            return st;
        if (v >= 0.0 && v <= limit && v != (double)(uint64_t)v)
            return mf_fail(c, "byte count must be whole for", key);
    }
    if (!(v >= 0.0 && v <= limit))
        return mf_fail(c, "size out of range for", key);
    *out = (uint64_t)(v + 0.5);
    return MOE_OK;
}

/* Keys of the two object kinds, as bits for the "repeated key" check. */
enum { K_NAME = 1, K_CPU = 2, K_FEAT = 4, K_CL = 8, K_CP = 16, K_RT = 32, K_RF = 64, K_GPUS = 128 };
enum { G_NAME = 1, G_VT = 2, G_VF = 4, G_DRV = 8, G_PW = 16, G_COMP = 32 };

static int mf_key_bit(const char *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, names[i]) == 0)
            return 1 << i;
    return 0;
}

static moe_status mf_features(mf_cursor *c, uint32_t *out)
{
    moe_status st = mf_expect(c, '[', "cpu_features");
    if (st != MOE_OK)
        return st;
    if (mf_accept(c, ']'))
        return MOE_OK;
    do {
        char name[32];
        moe_cpu_feature f;
        if ((st = mf_string(c, name, sizeof name, "cpu_features")) != MOE_OK)
            return st;
        if (!moe_cpu_feature_from_name(name, &f))
            return mf_fail(c, "unknown CPU feature in cpu_features:", name);
        *out |= (uint32_t)f;
    } while (mf_accept(c, ','));
    return mf_expect(c, ']', "cpu_features");
}

static moe_status mf_gpu(mf_cursor *c, moe_gpu_info *g, int index)
{
    static const char *const names[] = {"name", "vram_total", "vram_free", "driver",
                                        "power_watts", "compute"};
    char path[48];
    snprintf(path, sizeof path, "gpus[%d]", index);
    moe_status st = mf_expect(c, '{', path);
    if (st != MOE_OK)
        return st;
    int seen = 0;
    memset(g, 0, sizeof *g);
    g->compute = true;
    g->source = MOE_GPU_SOURCE_FILE;
    if (!mf_accept(c, '}')) {
        do {
            char key[32];
            if ((st = mf_string(c, key, sizeof key, path)) != MOE_OK)
                return st;
            int bit = mf_key_bit(key, names, sizeof names / sizeof names[0]);
            if (!bit)
                return moe_fail(c->err, MOE_ERR_FORMAT, "%s: byte %zu: unknown key \"%s\" in %s",
                                c->src, mf_offset(c), key, path);
            if (seen & bit)
                return moe_fail(c->err, MOE_ERR_FORMAT, "%s: byte %zu: repeated key \"%s\" in %s",
                                c->src, mf_offset(c), key, path);
            seen |= bit;
            if ((st = mf_expect(c, ':', path)) != MOE_OK)
                return st;
            double w;
            switch (bit) {
            case G_NAME: st = mf_string(c, g->name, sizeof g->name, "gpus[].name"); break;
            case G_VT: st = mf_size(c, &g->vram_total_bytes, "gpus[].vram_total"); break;
            case G_VF: st = mf_size(c, &g->vram_free_bytes, "gpus[].vram_free"); break;
            case G_DRV: st = mf_string(c, g->driver, sizeof g->driver, "gpus[].driver"); break;
            case G_PW:
                st = mf_number(c, &w, "gpus[].power_watts");
                if (st == MOE_OK && !(w >= 0.0 && w <= 100000.0))
                    st = mf_fail(c, "power out of range 0..100000 for", "gpus[].power_watts");
                g->power_watts = w;
                break;
            default: st = mf_bool(c, &g->compute, "gpus[].compute"); break;
            }
            if (st != MOE_OK)
                return st;
        } while (mf_accept(c, ','));
        if ((st = mf_expect(c, '}', path)) != MOE_OK)
            return st;
    }
    if (!(seen & G_VT))
        return moe_fail(c->err, MOE_ERR_FORMAT, "%s: %s: missing \"vram_total\"", c->src, path);
    if (!(seen & G_VF))
        g->vram_free_bytes = g->vram_total_bytes;
    if (g->vram_free_bytes > g->vram_total_bytes)
        return moe_fail(c->err, MOE_ERR_FORMAT, "%s: %s: vram_free is larger than vram_total",
                        c->src, path);
    if (!g->name[0])
        snprintf(g->name, sizeof g->name, "GPU %d", index);
    return MOE_OK;
}

static moe_status mf_gpus(mf_cursor *c, moe_machine *m)
{
    moe_status st = mf_expect(c, '[', "gpus");
    if (st != MOE_OK)
        return st;
    if (mf_accept(c, ']'))
        return MOE_OK;
    do {
        if (m->n_gpus >= MOE_HW_MAX_GPUS)
            return mf_fail(c, "more GPUs than MOE_HW_MAX_GPUS (16) in", "gpus");
        if ((st = mf_gpu(c, &m->gpus[m->n_gpus], m->n_gpus)) != MOE_OK)
            return st;
        m->n_gpus++;
    } while (mf_accept(c, ','));
    return mf_expect(c, ']', "gpus");
}

moe_status moe_machine_parse(const char *text, size_t len, const char *source,
                             moe_machine *out, moe_err *err)
{
    static const char *const names[] = {"name", "cpu", "cpu_features", "cores_logical",
                                        "cores_physical", "ram_total", "ram_free", "gpus"};
    if (!out || (!text && len))
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_machine_parse: NULL argument");
    memset(out, 0, sizeof *out);
    mf_cursor c = {text, text, text + len, source ? source : "machine description", err};
    moe_status st = mf_expect(&c, '{', NULL);
    if (st != MOE_OK)
        return st;
    int seen = 0;
    int64_t cores_l = 1, cores_p = 1;
    if (!mf_accept(&c, '}')) {
        do {
            char key[32];
            if ((st = mf_string(&c, key, sizeof key, "a key")) != MOE_OK)
                return st;
            int bit = mf_key_bit(key, names, sizeof names / sizeof names[0]);
            if (!bit)
                return moe_fail(err, MOE_ERR_FORMAT, "%s: byte %zu: unknown key \"%s\"", c.src,
                                mf_offset(&c), key);
            if (seen & bit)
                return moe_fail(err, MOE_ERR_FORMAT, "%s: byte %zu: repeated key \"%s\"", c.src,
                                mf_offset(&c), key);
            seen |= bit;
            if ((st = mf_expect(&c, ':', key)) != MOE_OK)
                return st;
            switch (bit) {
            case K_NAME: st = mf_string(&c, out->name, sizeof out->name, "name"); break;
            case K_CPU: st = mf_string(&c, out->cpu_name, sizeof out->cpu_name, "cpu"); break;
            case K_FEAT: st = mf_features(&c, &out->cpu_features); break;
            case K_CL: st = mf_int(&c, 1, 65536, &cores_l, "cores_logical"); break;
            case K_CP: st = mf_int(&c, 1, 65536, &cores_p, "cores_physical"); break;
            case K_RT: st = mf_size(&c, &out->ram_total_bytes, "ram_total"); break;
            case K_RF: st = mf_size(&c, &out->ram_free_bytes, "ram_free"); break;
            default: st = mf_gpus(&c, out); break;
            }
            if (st != MOE_OK)
                return st;
        } while (mf_accept(&c, ','));
        if ((st = mf_expect(&c, '}', NULL)) != MOE_OK)
            return st;
    }
    mf_skip_ws(&c);
    if (c.p != c.end)
        return mf_fail(&c, "text after the machine object", NULL);
    if (!(seen & K_RT) || out->ram_total_bytes == 0)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: missing or zero \"ram_total\"", c.src);
    if (!(seen & K_RF))
        out->ram_free_bytes = out->ram_total_bytes;
    if (out->ram_free_bytes > out->ram_total_bytes)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: ram_free is larger than ram_total", c.src);
    if (!(seen & K_CL) && (seen & K_CP))
        cores_l = cores_p;
    if (cores_p > cores_l)
        return moe_fail(err, MOE_ERR_FORMAT, "%s: cores_physical is larger than cores_logical", c.src);
    if (!(seen & K_CP))
        cores_p = cores_l;
    out->n_cores_logical = (int32_t)cores_l;
    out->n_cores_physical = (int32_t)cores_p;
    if (!out->name[0])
        snprintf(out->name, sizeof out->name, "%s", c.src);
    if (!out->cpu_name[0])
        snprintf(out->cpu_name, sizeof out->cpu_name, "unspecified CPU");
    snprintf(out->gpu_note, sizeof out->gpu_note, "described by %s", c.src);
    out->from_file = true;
    return MOE_OK;
}

moe_status moe_machine_load(const char *path, moe_machine *out, moe_err *err)
{
    enum { MAX_BYTES = 1 << 20 };
    if (!path || !out)
        return moe_fail(err, MOE_ERR_INVALID_ARG, "moe_machine_load: NULL argument");
    memset(out, 0, sizeof *out);
    FILE *f = moe_platform_fopen(path, "rb");
    if (!f)
        return moe_fail(err, MOE_ERR_IO, "%s: cannot open machine file", path);
    /* One byte more than allowed, to tell "exactly 1 MiB" from "more". */
    char *buf = malloc(MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        return moe_fail(err, MOE_ERR_NOMEM, "%s: no memory to read the machine file", path);
    }
    size_t n = fread(buf, 1, MAX_BYTES + 1, f);
    const bool read_error = ferror(f) != 0;
    fclose(f);
    moe_status st;
    if (read_error)
        st = moe_fail(err, MOE_ERR_IO, "%s: read error", path);
    else if (n > MAX_BYTES)
        st = moe_fail(err, MOE_ERR_FORMAT, "%s: machine file larger than 1 MiB", path);
    else
        st = moe_machine_parse(buf, n, path, out, err);
    free(buf);
    return st;
}

int32_t moe_machine_n_compute_gpus(const moe_machine *machine)
{
    int32_t n = 0;
    if (!machine)
        return 0;
    for (int32_t i = 0; i < machine->n_gpus && i < MOE_HW_MAX_GPUS; i++)
        n += machine->gpus[i].compute ? 1 : 0;
    return n;
}
