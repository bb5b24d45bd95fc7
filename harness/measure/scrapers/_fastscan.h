/* Shared by _fastscan.c (module, driver, records) and _fastscan_formats.c (the grammars):
 * the scanner's state, its result codes, and the text primitives the grammars use.
 * Lines reach the grammars only when they hold printable ASCII and tabs, so "\S" below
 * means anything but a space or a tab. */
#ifndef DETBENCH_FASTSCAN_H
#define DETBENCH_FASTSCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* what a line gave */
enum { FAIL = -1,     /* a Python exception is set */
       SKIP = 0,      /* nothing, exactly as feed() would */
       RECORD = 1,    /* a record, appended to the output list */
       PYTHON = 2 };  /* the line must go to feed() */

enum { KIND_WINDOW_MEAN, KIND_WINDOW_MEDIAN, KIND_CUMULATIVE_MEAN, KIND_ITERATION, KIND_NONE };

typedef struct {
    long long last;       /* scraper.last_iteration */
    long long run;        /* scraper.run */
    int has_param;        /* interval (mmcv) or window (mmengine) is not None */
    long long param;
    int prefer_last;      /* detectron2 */
    long long warmup;     /* detectron2 warmup_iter */
    long long window;     /* detectron2 window (its data_time's) */
} state_t;

typedef struct {
    const char *p, *q;    /* [p, q); p == NULL: absent */
} tok_t;

#define NO_TOK ((tok_t){NULL, NULL})

/* one parsed record; absent optional numbers have has_* == 0; data_kind KIND_NONE: the
   data time covers the record's own iterations (data_span 0) */
typedef struct {
    long long iteration, span, run, data_span;
    double time_s, data_s, mem, loss, rounding;
    int has_data, has_mem, has_loss, kind, data_kind;
} rec_t;

/* append the record for line ``index`` to ``out``: RECORD or FAIL (_fastscan.c) */
int fastscan_emit(PyObject *out, Py_ssize_t index, const rec_t *r);

/* one cleaned line [s, e) of each format (_fastscan_formats.c) */
int fastscan_mmcv(state_t *st, const char *s, const char *e, rec_t *r);
int fastscan_mmengine(state_t *st, const char *s, const char *e, rec_t *r);
int fastscan_detectron2(state_t *st, const char *s, const char *e, rec_t *r);
int fastscan_maskrcnn(state_t *st, const char *s, const char *e, rec_t *r);

/* ---- text primitives ---- */

/* The first place of lit (n bytes) in [s, e), or NULL. memchr looks for the literal's
 * rarest kind of byte (a colon, bracket or parenthesis: a few per line) rather than its
 * first one (often a space or a common letter). */
static inline const char *find(const char *s, const char *e, const char *lit, size_t n)
{
    size_t k = 0, i;
    const char *hit, *last;
    if (s == NULL || e - s < (Py_ssize_t)n)
        return NULL;
    for (i = 0; i < n; i++)
        if (lit[i] == ':' || lit[i] == '[' || lit[i] == '(') {
            k = i;
            break;
        }
    last = e - n;
    while (s <= last) {
        hit = memchr(s + k, lit[k], (size_t)(last - s) + 1);
        if (hit == NULL)
            return NULL;
        if (memcmp(hit - k, lit, n) == 0)
            return hit - k;
        s = hit - k + 1;
    }
    return NULL;
}

#define FIND(s, e, lit) find((s), (e), (lit), sizeof(lit) - 1)
#define STARTS(p, e, lit) starts((p), (e), (lit), sizeof(lit) - 1)

static inline int starts(const char *p, const char *e, const char *lit, size_t n)
{
    return e - p >= (Py_ssize_t)n && memcmp(p, lit, n) == 0;
}

static inline const char *digits(const char *p, const char *e)
{
    while (p < e && *p >= '0' && *p <= '9')
        p++;
    return p;
}

static inline const char *spaces(const char *p, const char *e)
{
    while (p < e && *p == ' ')
        p++;
    return p;
}

/* \S+: up to a space or tab */
static inline const char *run_nonspace(const char *p, const char *e)
{
    while (p < e && *p != ' ' && *p != '\t')
        p++;
    return p;
}

/* [^,\s]+, and the token of common.field_after(): up to a space, tab or comma */
static inline const char *run_nonsep(const char *p, const char *e)
{
    while (p < e && *p != ' ' && *p != '\t' && *p != ',')
        p++;
    return p;
}

/* common.field_after(text, label, s, e): the token after the first label in [s, e) */
static inline tok_t field_after(const char *s, const char *e, const char *label, size_t n)
{
    tok_t t = NO_TOK;
    const char *i = find(s, e, label, n);
    if (i != NULL) {
        t.p = i + n;
        t.q = run_nonsep(t.p, e);
    }
    return t;
}

/* what str.lstrip().startswith("{") says of a plain line */
static inline int json_like(const char *s, const char *e)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    return s < e && *s == '{';
}

/* int() of a run of ASCII digits; runs of more than 9 digits are left to Python */
static inline int to_int(tok_t t, long long *out)
{
    long long v = 0;
    const char *p = t.p;
    if (p == NULL || t.q <= p || t.q - p > 9)
        return 0;
    for (; p < t.q; p++)
        v = v * 10 + (*p - '0');
    *out = v;
    return 1;
}

/* float() of a token. A plain decimal of at most 15 digits is an exact integer divided
 * by an exact power of ten, which IEEE division rounds correctly: the same double as
 * float()'s correctly rounded result. Anything else goes through PyOS_string_to_double,
 * the conversion float() itself uses; a token it does not consume whole (underscores,
 * junk) is left to Python. */
static inline int to_double(tok_t t, double *out)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15};
    char buf[64];
    char *end;
    const char *r = t.p;
    int neg = 0, ndig = 0, frac = 0, dot = 0;
    unsigned long long m = 0;
    double v;
    Py_ssize_t n = t.q - t.p;

    if (t.p == NULL || n <= 0 || n >= (Py_ssize_t)sizeof buf)
        return 0;
#if !defined(__FLT_EVAL_METHOD__) || __FLT_EVAL_METHOD__ == 0
    if (*r == '-' || *r == '+')
        neg = *r++ == '-';
    for (; r < t.q && ndig <= 15; r++) {
        if (*r >= '0' && *r <= '9') {
            m = m * 10 + (unsigned)(*r - '0');
            ndig++;
            frac += dot;
        }
        else if (*r == '.' && !dot)
            dot = 1;
        else
            break;
    }
    if (r == t.q && ndig > 0 && ndig <= 15) {
        v = (double)m / pow10[frac];
        *out = neg ? -v : v;
        return 1;
    }
#endif
    memcpy(buf, t.p, (size_t)n);
    buf[n] = '\0';
    v = PyOS_string_to_double(buf, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != buf + n)
        return 0;
    *out = v;
    return 1;
}

/* A printed time: a plain decimal token of at most 15 digits, its value as float() reads it
   (an exact integer over an exact power of ten, correctly rounded) and common.half_unit() of
   it, 0.5 / 10**d for d digits after the point (divided as Python divides). Any other token
   (an exponent, a word, more digits) is left to Python: 0. */
static inline int timed(tok_t t, double *out, double *half)
{
    static const double pow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                   1e11, 1e12, 1e13, 1e14, 1e15};
    const char *r = t.p;
    int neg = 0, ndig = 0, frac = 0, dot = 0;
    unsigned long long m = 0;
    double v;
#if !defined(__FLT_EVAL_METHOD__) || __FLT_EVAL_METHOD__ == 0
    if (r == NULL || t.q <= r)
        return 0;
    if (*r == '-' || *r == '+')
        neg = *r++ == '-';
    for (; r < t.q; r++) {
        if (*r >= '0' && *r <= '9') {
            if (++ndig > 15)
                return 0;
            m = m * 10 + (unsigned)(*r - '0');
            frac += dot;
        }
        else if (*r == '.' && !dot)
            dot = 1;
        else
            return 0;
    }
    if (ndig == 0)
        return 0;
    v = (double)m / pow10[frac];
    *out = neg ? -v : v;
    *half = 0.5 / pow10[frac];
    return 1;
#else
    return 0;
#endif
}

/* the time and data time tokens (data optional: b.p NULL) and the coarser rounding of the two */
static inline int timed_pair(tok_t a, double *va, tok_t b, double *vb, int *has_b, double *rounding)
{
    double ha, hb;
    if (!timed(a, va, &ha))
        return 0;
    *has_b = b.p != NULL;
    if (b.p != NULL) {
        if (!timed(b, vb, &hb))
            return 0;
        if (hb > ha)
            ha = hb;
    }
    *rounding = ha;
    return 1;
}

/* an optional number: absent is fine */
static inline int opt_double(tok_t t, double *out, int *has)
{
    *has = t.p != NULL;
    return t.p == NULL || to_double(t, out);
}

#endif
