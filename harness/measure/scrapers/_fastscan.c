/* Compiled line scanner for the text logs of mmdetection (mmcv 0.x/1.x and mmengine),
 * detectron2 and maskrcnn-benchmark: the module, its driver and the records it builds.
 *
 * It is an accelerator, never an authority: for every line it either produces exactly
 * what the Python scraper's feed() would (a record, or nothing) or stops and leaves
 * that one line to Python. It cleans lines as common.clean_line() does (carriage-return
 * redraws, colour codes, rank prefixes) and leaves to Python every line that is not
 * then printable ASCII, every JSON line, every line whose shape it does not read in
 * full, and every number it cannot convert exactly as float() does.
 * The grammars are in _fastscan_formats.c; the differential tests in
 * tests/scrapers/test_native_scanner.py hold them to the Python scrapers.
 *
 * One function per format, all called the same way:
 *     scan(scraper, data, pos, end, line, out) -> (pos, line)
 * reads the whole lines of data[pos:end] (bytes; the first is line number ``line``),
 * appends IterationRecords to the list ``out``, reads and updates the scraper's state
 * (last_iteration; interval or window once inferred), and returns where it stopped:
 * pos == end when it read everything, else the start of the line that Python must feed.
 * Python takes every record whose iteration does not rise past last_iteration (a repeat,
 * a restart, a record out of order: common.Scraper.accept decides) and every start
 * banner; while a run needs it (last_iteration is common.HANDOVER), every line.
 */
#include "_fastscan.h"

enum { MMCV, MMENGINE, DETECTRON2, MASKRCNN };

#define LIMIT (1LL << 62)   /* state values beyond this stay with Python */

#define NFIELDS 14

static PyTypeObject *record_type;
static PyObject *kinds[4];   /* indexed by KIND_* */
static PyObject *attr_last, *attr_interval, *attr_window, *attr_prefer_last, *attr_warmup, *attr_run;

/* ---- records ---- */

static PyObject *opt_float(int has, double v)
{
    return has ? PyFloat_FromDouble(v) : Py_NewRef(Py_None);
}

/* a record's rounding: the same few values over a whole log, so one float object each time
   it repeats (a float is immutable: sharing it changes nothing a reader can see) */
static PyObject *rounding_float(double v)
{
    static PyObject *last = NULL;
    if (last == NULL || PyFloat_AS_DOUBLE(last) != v) {
        Py_XDECREF(last);
        last = PyFloat_FromDouble(v);
        if (last == NULL)
            return NULL;
    }
    return Py_NewRef(last);
}

int fastscan_emit(PyObject *out, Py_ssize_t index, const rec_t *r)
{
    PyObject *items[NFIELDS], *rec;
    int i, ok;

    items[0] = PyLong_FromLongLong(r->iteration);
    items[1] = PyLong_FromSsize_t(index);
    items[2] = PyFloat_FromDouble(r->time_s);
    items[3] = opt_float(r->has_data, r->data_s);
    items[4] = PyLong_FromLongLong(r->span);
    items[5] = Py_NewRef(kinds[r->kind]);
    items[6] = Py_NewRef(Py_None);   /* images_per_s */
    items[7] = Py_NewRef(Py_None);   /* images */
    items[8] = opt_float(r->has_mem, r->mem);
    items[9] = opt_float(r->has_loss, r->loss);
    items[10] = PyLong_FromLongLong(r->run);
    items[11] = rounding_float(r->rounding);
    items[12] = PyLong_FromLongLong(r->data_span);
    items[13] = Py_NewRef(r->data_kind == KIND_NONE ? Py_None : kinds[r->data_kind]);
    rec = record_type->tp_alloc(record_type, NFIELDS);
    ok = rec != NULL;
    for (i = 0; i < NFIELDS; i++) {
        ok = ok && items[i] != NULL;
        if (rec != NULL)
            PyTuple_SET_ITEM(rec, i, items[i]);   /* the tuple owns it, even on failure */
        else
            Py_XDECREF(items[i]);
    }
    if (!ok) {
        Py_XDECREF(rec);
        return FAIL;
    }
    PyObject_GC_UnTrack(rec);   /* numbers, a str and None: it cannot be in a cycle */
    ok = PyList_Append(out, rec);
    Py_DECREF(rec);
    return ok < 0 ? FAIL : RECORD;
}

/* ---- what common.clean_line() would change ---- */

/* printable ASCII and tabs only: nothing for clean_line() to remove but a rank prefix */
static int plain(const char *s, const char *e)
{
    const unsigned char *p = (const unsigned char *)s, *end = (const unsigned char *)e;
    unsigned char bad = 0;
    for (; p < end; p++)   /* no early exit: the compiler vectorises this */
        bad |= (unsigned char)((unsigned char)(*p - 0x20) > 0x5e) & (unsigned char)(*p != '\t');
    return bad == 0;
}

#define CLEAN_MAX 4096   /* longer lines with colour codes are left to Python */

/* common.ANSI_RE.sub("", line) into out: the length, or -1 when it would not fit. The
 * pattern's classes are disjoint ASCII ranges, so its greedy runs never backtrack. */
static Py_ssize_t strip_ansi(const char *s, const char *e, char *out)
{
    const unsigned char *p = (const unsigned char *)s, *end = (const unsigned char *)e, *q;
    Py_ssize_t n = 0;
    if (e - s > CLEAN_MAX)
        return -1;
    while (p < end) {
        if (*p == 0x1b && p + 1 < end) {
            q = p + 1;
            if (*q == '[') {   /* \x1b\[[0-9;?]*[ -/]*[@-~] */
                for (q++; q < end && ((*q >= '0' && *q <= '9') || *q == ';' || *q == '?'); q++)
                    ;
                for (; q < end && *q >= 0x20 && *q <= 0x2f; q++)
                    ;
                if (q < end && *q >= 0x40 && *q <= 0x7e) {
                    p = q + 1;
                    continue;
                }
            }
            /* \x1b[@-Z\\-_] */
            else if ((*q >= 0x40 && *q <= 0x5a) || (*q >= 0x5c && *q <= 0x5f)) {
                p = q + 1;
                continue;
            }
        }
        out[n++] = (char)*p++;
    }
    return n;
}

static int any_nonzero(const char *p, const char *q)
{
    for (; p < q; p++)
        if (*p != '0')
            return 1;
    return 0;
}

/* common.RANK_RE at the start of the line: the rest of the line, or NULL; the rank's
   digits in [*dp, *dq) */
static const char *rank_prefix(const char *s, const char *e, const char **dp, const char **dq)
{
    const char *p, *q, *r;
    if (*s == '[') {
        p = s + 1;
        if (STARTS(p, e, "rank"))
            p += 4;
        else if (STARTS(p, e, "default"))
            p += 7;
        q = digits(p, e);
        if (q > p && STARTS(q, e, "]:")) {              /* [rank1]: [default1]: [1]: */
            *dp = p;
            *dq = q;
            return q + 2;
        }
        p = s + 1;
        q = digits(p, e);
        if (q > p && q < e && *q == ',') {              /* [1,1]<stdout>: */
            r = q + 1;
            q = digits(r, e);
            if (q > r && (STARTS(q, e, "]<stdout>:") || STARTS(q, e, "]<stderr>:"))) {
                *dp = r;
                *dq = q;
                return q + 10;
            }
        }
        return NULL;
    }
    q = digits(s, e);
    if (q > s && STARTS(q, e, ": ")) {                  /* 1: */
        *dp = s;
        *dq = q;
        return q + 2;
    }
    return NULL;
}

/* ---- the driver ---- */

static int one_line(int fmt, state_t *st, const char *s, const char *e, Py_ssize_t index,
                    PyObject *out)
{
    int r;
    const char *rest, *p, *dp, *dq;
    char clean[CLEAN_MAX];
    Py_ssize_t n;
    rec_t rec;

    if (!plain(s, e)) {
        /* clean_line(): the last segment after carriage returns, without colour codes.
           Bytes before a '\r' never change how the ASCII after it decodes. */
        if (memchr(s, '\r', (size_t)(e - s)) != NULL) {
            while (e > s && e[-1] == '\r')
                e--;
            for (p = e; p > s && p[-1] != '\r'; p--)
                ;
            s = p;
        }
        if (memchr(s, 0x1b, (size_t)(e - s)) != NULL) {
            n = strip_ansi(s, e, clean);
            if (n < 0)
                return PYTHON;
            s = clean;
            e = clean + n;
        }
        if (!plain(s, e))
            return PYTHON;   /* other bytes: Python decodes them */
    }
    if (s < e && (*s == '[' || (*s >= '0' && *s <= '9'))) {
        rest = rank_prefix(s, e, &dp, &dq);
        if (rest != NULL) {
            if (dq - dp > 64)
                return PYTHON;   /* int() may refuse so many digits */
            if (any_nonzero(dp, dq))
                return SKIP;     /* another rank's line */
            s = rest;
        }
    }
    memset(&rec, 0, sizeof rec);
    rec.run = st->run;
    rec.data_kind = KIND_NONE;
    switch (fmt) {
    case MMCV:
        r = fastscan_mmcv(st, s, e, &rec);
        break;
    case MMENGINE:
        r = fastscan_mmengine(st, s, e, &rec);
        break;
    case DETECTRON2:
        r = fastscan_detectron2(st, s, e, &rec);
        break;
    default:
        r = fastscan_maskrcnn(st, s, e, &rec);
    }
    return r == RECORD ? fastscan_emit(out, index, &rec) : r;
}

/* an int attribute within LIMIT (or None when allowed): 1; 0 when Python must keep the
   line (another type, a larger int); -1 on error */
static int get_int(PyObject *obj, PyObject *name, int allow_none, int *has, long long *out)
{
    int overflow = 0, ok = 0;
    long long v;
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    if (value == Py_None && allow_none) {
        *has = 0;
        ok = 1;
    }
    else if (PyLong_CheckExact(value)) {
        v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            ok = -1;
        else if (!overflow && v > -LIMIT && v < LIMIT) {
            *out = v;
            *has = 1;
            ok = 1;
        }
    }
    Py_DECREF(value);
    return ok;
}

static int set_int(PyObject *obj, PyObject *name, long long v)
{
    int r;
    PyObject *value = PyLong_FromLongLong(v);
    if (value == NULL)
        return -1;
    r = PyObject_SetAttr(obj, name, value);
    Py_DECREF(value);
    return r;
}

static int load_state(int fmt, PyObject *scraper, state_t *st)
{
    int has = 0, r;
    PyObject *prefer;

    memset(st, 0, sizeof *st);
    r = get_int(scraper, attr_last, 0, &has, &st->last);
    if (r <= 0)
        return r;
    r = get_int(scraper, attr_run, 0, &has, &st->run);
    if (r <= 0)
        return r;
    switch (fmt) {
    case MMCV:
        return get_int(scraper, attr_interval, 1, &st->has_param, &st->param);
    case MMENGINE:
        return get_int(scraper, attr_window, 1, &st->has_param, &st->param);
    case MASKRCNN:
        return r;
    default:
        prefer = PyObject_GetAttr(scraper, attr_prefer_last);
        if (prefer == NULL)
            return -1;
        st->prefer_last = PyObject_IsTrue(prefer);
        Py_DECREF(prefer);
        if (st->prefer_last < 0)
            return -1;
        r = get_int(scraper, attr_warmup, 0, &has, &st->warmup);
        if (r <= 0)
            return r;
        return get_int(scraper, attr_window, 0, &has, &st->window);
    }
}

static int save_state(int fmt, PyObject *scraper, const state_t *st, const state_t *was)
{
    if (st->last != was->last && set_int(scraper, attr_last, st->last) < 0)
        return -1;
    if ((fmt == MMCV || fmt == MMENGINE) && st->has_param && !was->has_param)
        return set_int(scraper, fmt == MMCV ? attr_interval : attr_window, st->param);
    return 0;
}

static PyObject *scan(int fmt, PyObject *args)
{
    PyObject *scraper, *out;
    Py_buffer view;
    Py_ssize_t pos, end, line;
    state_t st, was;
    const char *buf, *s, *nl, *e;
    int r = SKIP, loaded;

    if (!PyArg_ParseTuple(args, "Oy*nnnO!:scan", &scraper, &view, &pos, &end, &line,
                          &PyList_Type, &out))
        return NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "scan: need 0 <= pos <= end <= len(data)");
        return NULL;
    }
    loaded = load_state(fmt, scraper, &st);
    if (loaded < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    was = st;
    buf = (const char *)view.buf;
    while (loaded && pos < end) {   /* state Python must keep: leave the line to it */
        s = buf + pos;
        nl = memchr(s, '\n', (size_t)(end - pos));
        e = nl != NULL ? nl : buf + end;
        r = one_line(fmt, &st, s, e, line, out);
        if (r == PYTHON || r == FAIL)
            break;
        pos = (e - buf) + (nl != NULL);
        line++;
    }
    PyBuffer_Release(&view);
    if (r == FAIL || (loaded && save_state(fmt, scraper, &st, &was) < 0))
        return NULL;
    return Py_BuildValue("nn", pos, line);
}

static PyObject *scan_mmcv(PyObject *self, PyObject *args) { return scan(MMCV, args); }
static PyObject *scan_mmengine(PyObject *self, PyObject *args) { return scan(MMENGINE, args); }
static PyObject *scan_detectron2(PyObject *self, PyObject *args) { return scan(DETECTRON2, args); }
static PyObject *scan_maskrcnn(PyObject *self, PyObject *args) { return scan(MASKRCNN, args); }

#define SCAN_DOC(cls) \
    "scan(scraper, data, pos, end, line, out) -> (pos, line)\n\n" \
    "Read the whole lines of data[pos:end] as " cls ".feed would; append records to\n" \
    "out; stop at the first line Python must feed (pos == end when none)."

static PyMethodDef methods[] = {
    {"mmcv", scan_mmcv, METH_VARARGS, SCAN_DOC("mmdet_v2.MmcvScraper")},
    {"mmengine", scan_mmengine, METH_VARARGS, SCAN_DOC("mmdet_v3.MmengineScraper")},
    {"detectron2", scan_detectron2, METH_VARARGS, SCAN_DOC("detectron2.Detectron2Scraper")},
    {"maskrcnn", scan_maskrcnn, METH_VARARGS, SCAN_DOC("maskrcnn_benchmark.MaskrcnnScraper")},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastscan",
    "Compiled scanner for the text logs of mmdetection, detectron2 and maskrcnn-benchmark.",
    -1, methods, NULL, NULL, NULL, NULL
};

static PyObject *get_str(PyObject *records, const char *name)
{
    PyObject *v = PyObject_GetAttrString(records, name);
    if (v != NULL && !PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "harness.measure.records.%s is not a str", name);
        Py_CLEAR(v);
    }
    return v;
}

/* whether IterationRecord is the tuple type with the fields fastscan_emit() fills */
static int fields_as_built(PyObject *type)
{
    PyObject *fields, *expected;
    int same;
    if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type))
        return 0;
    fields = PyObject_GetAttrString(type, "_fields");
    if (fields == NULL)
        return 0;
    expected = Py_BuildValue("(ssssssssssssss)", "iteration", "line", "time_s", "data_time_s",
                             "span", "kind", "images_per_s", "images", "memory_mb", "loss", "run",
                             "rounding", "data_span", "data_kind");
    same = expected != NULL && PyObject_RichCompareBool(fields, expected, Py_EQ) == 1;
    Py_DECREF(fields);
    Py_XDECREF(expected);
    PyErr_Clear();
    return same;
}

PyMODINIT_FUNC PyInit__fastscan(void)
{
    PyObject *records = PyImport_ImportModule("harness.measure.records"), *type;
    if (records == NULL)
        return NULL;
    type = PyObject_GetAttrString(records, "IterationRecord");
    kinds[KIND_WINDOW_MEAN] = get_str(records, "WINDOW_MEAN");
    kinds[KIND_WINDOW_MEDIAN] = get_str(records, "WINDOW_MEDIAN");
    kinds[KIND_CUMULATIVE_MEAN] = get_str(records, "CUMULATIVE_MEAN");
    kinds[KIND_ITERATION] = get_str(records, "ITERATION");
    Py_DECREF(records);
    if (type == NULL || !kinds[0] || !kinds[1] || !kinds[2] || !kinds[3])
        return NULL;
    if (!fields_as_built(type)) {   /* records.py changed: the pure-Python path takes over */
        Py_DECREF(type);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError,
                            "_fastscan was built for other IterationRecord fields; rebuild it");
        return NULL;
    }
    record_type = (PyTypeObject *)type;
    attr_last = PyUnicode_InternFromString("last_iteration");
    attr_interval = PyUnicode_InternFromString("interval");
    attr_window = PyUnicode_InternFromString("window");
    attr_prefer_last = PyUnicode_InternFromString("prefer_last");
    attr_warmup = PyUnicode_InternFromString("warmup_iter");
    attr_run = PyUnicode_InternFromString("run");
    if (!attr_last || !attr_interval || !attr_window || !attr_prefer_last || !attr_warmup || !attr_run)
        return NULL;
    return PyModule_Create(&module);
}
