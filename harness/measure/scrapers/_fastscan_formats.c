/* The four grammars of the compiled scanner: one cleaned, printable-ASCII line in, and
 * SKIP, RECORD (with *r filled) or PYTHON out, exactly as the Python scraper's feed()
 * would decide. Each follows its regular expression in the Python module, choice for
 * choice: the match starts at the leftmost head that lets the rest match, a lazy
 * "[^\n]*?" takes the first place that works, a greedy number takes the longest run,
 * optional groups are taken when they match. When no head lets the rest match, the
 * pattern matches nowhere and the scraper's unmatched() rule applies. State changes
 * follow the order of the Python code; a number Python might read differently hands
 * the line over before any state changes. */
#include "_fastscan.h"

#define TOK(a, b) ((tok_t){(a), (b)})

/* ---- mmdet_v2.TEXT_RE, MmcvScraper.from_match / unmatched ---- */

/* "Epoch [E][I/N]\t" at c: E, I, N in h; the place after the tab, or NULL */
static const char *mmcv_epoch_head(const char *c, const char *e, tok_t h[3])
{
    const char *p = c + 7, *q = digits(p, e);
    if (q == p || !STARTS(q, e, "]["))
        return NULL;
    h[0] = TOK(p, q);
    p = q + 2;
    q = digits(p, e);
    if (q == p || q >= e || *q != '/')
        return NULL;
    h[1] = TOK(p, q);
    p = q + 1;
    q = digits(p, e);
    if (q == p || !STARTS(q, e, "]\t"))
        return NULL;
    h[2] = TOK(p, q);
    return q + 2;
}

/* "Iter [I/N]\t" at c: I in h[1] */
static const char *mmcv_iter_head(const char *c, const char *e, tok_t h[3])
{
    const char *p = c + 6, *q = digits(p, e);
    if (q == p || q >= e || *q != '/')
        return NULL;
    h[1] = TOK(p, q);
    p = q + 1;
    q = digits(p, e);
    if (q == p || !STARTS(q, e, "]\t"))
        return NULL;
    return q + 2;
}

/* "[^\n]*?, time: NUM, data_time: NUM, " from t: the place after it, or NULL */
static const char *mmcv_times(const char *t, const char *e, tok_t *time, tok_t *data)
{
    const char *j, *p, *q;
    for (j = FIND(t, e, ", time: "); j != NULL; j = FIND(j + 1, e, ", time: ")) {
        p = j + 8;
        q = run_nonsep(p, e);
        if (q == p || !STARTS(q, e, ", data_time: "))
            continue;
        *time = TOK(p, q);
        p = q + 13;
        q = run_nonsep(p, e);
        if (q == p || !STARTS(q, e, ", "))
            continue;
        *data = TOK(p, q);
        return q + 2;
    }
    return NULL;
}

int fastscan_mmcv(state_t *st, const char *s, const char *e, rec_t *r)
{
    const char *pe, *pi, *c, *t, *p, *q, *j, *mend = NULL;
    tok_t h[3] = {NO_TOK, NO_TOK, NO_TOK}, time = NO_TOK, data = NO_TOK, mem = NO_TOK;
    tok_t loss = NO_TOK;
    int epoch_head = 0;
    long long epoch, inner, length;

    if (json_like(s, e))
        return PYTHON;
    if (FIND(s, e, "data_time: ") == NULL)   /* MmcvScraper.banners go to feed() */
        return FIND(s, e, "Start running, host:") != NULL || FIND(s, e, "Environment info:") != NULL
            ? PYTHON : SKIP;
    pe = FIND(s, e, "Epoch [");
    pi = FIND(s, e, "Iter [");
    while (pe != NULL || pi != NULL) {
        epoch_head = pe != NULL && (pi == NULL || pe < pi);
        c = epoch_head ? pe : pi;
        t = epoch_head ? mmcv_epoch_head(c, e, h) : mmcv_iter_head(c, e, h);
        if (t != NULL && (mend = mmcv_times(t, e, &time, &data)) != NULL)
            break;
        if (epoch_head)
            pe = FIND(c + 1, e, "Epoch [");
        else
            pi = FIND(c + 1, e, "Iter [");
    }
    if (mend == NULL)
        return FIND(s, e, "(val)") != NULL ? SKIP : PYTHON;
    /* "(?:memory: (NUM), )?" */
    if (STARTS(mend, e, "memory: ")) {
        q = run_nonsep(mend + 8, e);
        if (q > mend + 8 && STARTS(q, e, ", ")) {
            mem = TOK(mend + 8, q);
            mend = q + 2;
        }
    }
    /* "(?:(?:[^\n]*, )?loss: (NUM))?": the last ", loss: NUM", else "loss: NUM" here */
    for (j = FIND(mend, e, ", loss: "); j != NULL; j = FIND(j + 1, e, ", loss: ")) {
        q = run_nonsep(j + 8, e);
        if (q > j + 8)
            loss = TOK(j + 8, q);
    }
    if (loss.p == NULL && STARTS(mend, e, "loss: ")) {
        p = mend + 6;
        q = run_nonsep(p, e);
        if (q > p)
            loss = TOK(p, q);
    }
    if (epoch_head) {
        if (!to_int(h[0], &epoch) || !to_int(h[1], &inner) || !to_int(h[2], &length))
            return PYTHON;
        r->iteration = (epoch - 1) * length + inner;
    }
    else {
        if (!to_int(h[1], &inner))
            return PYTHON;
        r->iteration = inner;
    }
    if (r->iteration <= st->last)
        return PYTHON;   /* accept() decides: a repeat, a restart, a record out of order */
    /* from_match sets the interval before it converts the numbers */
    if (!timed_pair(time, &r->time_s, data, &r->data_s, &r->has_data, &r->rounding)
            || !opt_double(mem, &r->mem, &r->has_mem) || !opt_double(loss, &r->loss, &r->has_loss))
        return PYTHON;
    st->last = r->iteration;
    if (!st->has_param) {
        st->param = inner > 0 ? inner : 1;
        st->has_param = 1;
    }
    r->span = inner < st->param ? inner : st->param;
    r->has_data = 1;
    r->kind = KIND_WINDOW_MEAN;
    return RECORD;
}

/* ---- mmdet_v3.TEXT_RE, MmengineScraper.from_match / unmatched ---- */

/* "Epoch(train) *[E][ *I/N]  " at c */
static const char *mmengine_epoch_head(const char *c, const char *e, tok_t h[3])
{
    const char *p = spaces(c + 12, e), *q;
    if (p >= e || *p != '[')
        return NULL;
    p++;
    q = digits(p, e);
    if (q == p || !STARTS(q, e, "]["))
        return NULL;
    h[0] = TOK(p, q);
    p = spaces(q + 2, e);
    q = digits(p, e);
    if (q == p || q >= e || *q != '/')
        return NULL;
    h[1] = TOK(p, q);
    p = q + 1;
    q = digits(p, e);
    if (q == p || !STARTS(q, e, "]  "))
        return NULL;
    h[2] = TOK(p, q);
    return q + 3;
}

/* "Iter(train) *[ *I/N]  " at c: I in h[1] */
static const char *mmengine_iter_head(const char *c, const char *e, tok_t h[3])
{
    const char *p = spaces(c + 11, e), *q;
    if (p >= e || *p != '[')
        return NULL;
    p = spaces(p + 1, e);
    q = digits(p, e);
    if (q == p || q >= e || *q != '/')
        return NULL;
    h[1] = TOK(p, q);
    p = q + 1;
    q = digits(p, e);
    if (q == p || !STARTS(q, e, "]  "))
        return NULL;
    return q + 3;
}

/* "[^\n]*?  time: \S+  data_time: \S+  " from t */
static const char *mmengine_times(const char *t, const char *e, tok_t *time, tok_t *data)
{
    const char *j, *p, *q;
    for (j = FIND(t, e, "  time: "); j != NULL; j = FIND(j + 1, e, "  time: ")) {
        p = j + 8;
        q = run_nonspace(p, e);
        if (q == p || !STARTS(q, e, "  data_time: "))
            continue;
        *time = TOK(p, q);
        p = q + 13;
        q = run_nonspace(p, e);
        if (q == p || !STARTS(q, e, "  "))
            continue;
        *data = TOK(p, q);
        return q + 2;
    }
    return NULL;
}

int fastscan_mmengine(state_t *st, const char *s, const char *e, rec_t *r)
{
    const char *pe, *pi, *c, *t, *q, *mend = NULL;
    tok_t h[3] = {NO_TOK, NO_TOK, NO_TOK}, time = NO_TOK, data = NO_TOK, mem = NO_TOK, loss;
    int epoch_head = 0;
    long long epoch, inner, length;

    if (json_like(s, e))
        return PYTHON;
    if (FIND(s, e, "  data_time: ") == NULL)   /* MmengineScraper.banners go to feed() */
        return FIND(s, e, "Checkpoints will be saved to ") != NULL || FIND(s, e, "resumed epoch: ") != NULL
            || FIND(s, e, "window_size=") != NULL ? PYTHON : SKIP;   /* and the config's window */
    pe = FIND(s, e, "Epoch(train)");
    pi = FIND(s, e, "Iter(train)");
    while (pe != NULL || pi != NULL) {
        epoch_head = pe != NULL && (pi == NULL || pe < pi);
        c = epoch_head ? pe : pi;
        t = epoch_head ? mmengine_epoch_head(c, e, h) : mmengine_iter_head(c, e, h);
        if (t != NULL && (mend = mmengine_times(t, e, &time, &data)) != NULL)
            break;
        if (epoch_head)
            pe = FIND(c + 1, e, "Epoch(train)");
        else
            pi = FIND(c + 1, e, "Iter(train)");
    }
    if (mend == NULL)
        return FIND(s, e, "(val)") != NULL || FIND(s, e, "(test)") != NULL ? SKIP : PYTHON;
    /* "(?:memory: (\S+)  )?" */
    if (STARTS(mend, e, "memory: ")) {
        q = run_nonspace(mend + 8, e);
        if (q > mend + 8 && STARTS(q, e, "  ")) {
            mem = TOK(mend + 8, q);
            mend = q + 2;
        }
    }
    loss = field_after(mend - 2, e, "  loss: ", 8);
    if (epoch_head) {
        if (!to_int(h[0], &epoch) || !to_int(h[1], &inner) || !to_int(h[2], &length))
            return PYTHON;
        r->iteration = (epoch - 1) * length + inner;
    }
    else if (!to_int(h[1], &r->iteration))
        return PYTHON;
    if (!timed_pair(time, &r->time_s, data, &r->data_s, &r->has_data, &r->rounding)
            || !opt_double(mem, &r->mem, &r->has_mem) || !opt_double(loss, &r->loss, &r->has_loss))
        return PYTHON;
    if (r->iteration <= st->last)
        return PYTHON;   /* accept() decides; _span() there sets the window as it would here */
    if (!st->has_param) {
        st->param = r->iteration > 0 ? r->iteration : 1;
        st->has_param = 1;
    }
    r->span = r->iteration < st->param ? r->iteration : st->param;
    st->last = r->iteration;
    r->has_data = 1;
    r->kind = KIND_WINDOW_MEAN;
    return RECORD;
}

/* ---- detectron2.RECORD_RE, Detectron2Scraper.from_match / unmatched ---- */

/* an optional "label\S+  " at *p: the token, and *p moved past it */
static tok_t optional_field(const char **p, const char *e, const char *label, size_t n)
{
    tok_t t = NO_TOK;
    const char *q;
    if (starts(*p, e, label, n)) {
        q = run_nonspace(*p + n, e);
        if (q > *p + n && STARTS(q, e, "  ")) {
            t = TOK(*p + n, q);
            *p = q + 2;
        }
    }
    return t;
}

/* "[^\n]*? time: \S+  " from t */
static const char *detectron2_time(const char *t, const char *e, tok_t *time)
{
    const char *j, *p, *q;
    for (j = FIND(t, e, " time: "); j != NULL; j = FIND(j + 1, e, " time: ")) {
        p = j + 7;
        q = run_nonspace(p, e);
        if (q > p && STARTS(q, e, "  ")) {
            *time = TOK(p, q);
            return q + 2;
        }
    }
    return NULL;
}

int fastscan_detectron2(state_t *st, const char *s, const char *e, rec_t *r)
{
    const char *c, *q = NULL, *mend = NULL;
    tok_t time = NO_TOK, last, data, last_data, loss, mem, t, d;
    long long it0, n;

    if (json_like(s, e))
        return PYTHON;
    /* leftmost "iter: (\d+)  " that lets the rest match */
    for (c = FIND(s, e, "iter: "); c != NULL; c = FIND(c + 1, e, "iter: ")) {
        q = digits(c + 6, e);
        if (q > c + 6 && STARTS(q, e, "  ") && (mend = detectron2_time(q + 2, e, &time)) != NULL)
            break;
    }
    if (mend == NULL) {   /* no key (a banner goes to feed()), or a line before warmup (no time) */
        if (FIND(s, e, "iter: ") == NULL)
            return FIND(s, e, "Starting training from iteration ") != NULL ? PYTHON : SKIP;
        return FIND(s, e, " time: ") == NULL ? SKIP : PYTHON;
    }
    last = optional_field(&mend, e, "last_time: ", 11);
    data = optional_field(&mend, e, "data_time: ", 11);
    last_data = optional_field(&mend, e, "last_data_time: ", 16);
    loss = field_after(c, mend, "total_loss: ", 12);
    mem = field_after(mend, e, "max_mem: ", 9);
    while (mem.p != NULL && mem.q > mem.p && mem.q[-1] == 'M')
        mem.q--;   /* mem.rstrip("M") */
    if (!to_int(TOK(c + 6, q), &it0) || !opt_double(mem, &r->mem, &r->has_mem)
            || !opt_double(loss, &r->loss, &r->has_loss))
        return PYTHON;
    if (st->prefer_last && last.p != NULL) {
        t = last;
        d = last_data;
        r->span = 1;
        r->kind = KIND_ITERATION;
    }
    else {   /* data_time is a window mean of its own: of the last min(window, it0 + 1) */
        t = time;
        d = data;
        n = it0 + 2 - st->warmup;
        r->span = n > 1 ? n : 1;
        r->kind = KIND_CUMULATIVE_MEAN;
        if (d.p != NULL) {
            r->data_span = it0 + 1 < st->window ? it0 + 1 : st->window;
            r->data_kind = KIND_WINDOW_MEAN;
        }
    }
    if (!timed_pair(t, &r->time_s, d, &r->data_s, &r->has_data, &r->rounding))
        return PYTHON;
    r->iteration = it0 + 1;
    if (r->iteration <= st->last)
        return PYTHON;   /* accept() decides */
    st->last = r->iteration;
    return RECORD;
}

/* ---- maskrcnn_benchmark.RECORD_RE, MaskrcnnScraper.from_match ---- */

/* "[^\n]*?time: \S+ \((\S+)\)  data: \S+ \((\S+)\)" from t: the place after it; the
   means since the start, in parentheses, into time and data */
static const char *maskrcnn_meters(const char *t, const char *e, tok_t *time, tok_t *data)
{
    const char *j, *p, *q, *b;
    for (j = FIND(t, e, "time: "); j != NULL; j = FIND(j + 1, e, "time: ")) {
        p = j + 6;
        q = run_nonspace(p, e);
        if (q == p || !STARTS(q, e, " ("))
            continue;
        p = q + 2;
        q = run_nonspace(p, e);   /* "\S+\)" before a space: the run ends in ')' */
        if (q - p < 2 || q[-1] != ')' || !STARTS(q, e, "  data: "))
            continue;
        *time = TOK(p, q - 1);
        p = q + 8;
        q = run_nonspace(p, e);
        if (q == p || !STARTS(q, e, " ("))
            continue;
        p = q + 2;
        q = run_nonspace(p, e);   /* "\S+\)" at the end: up to the run's last ')' */
        for (b = q - 1; b > p && *b != ')'; b--)
            ;
        if (b > p) {
            *data = TOK(p, b);
            return b + 1;
        }
    }
    return NULL;
}

int fastscan_maskrcnn(state_t *st, const char *s, const char *e, rec_t *r)
{
    const char *c, *q = NULL, *mend = NULL;
    tok_t time = NO_TOK, data = NO_TOK, loss, mem;

    if (FIND(s, e, "  data: ") == NULL)   /* MaskrcnnScraper.banners go to feed() */
        return FIND(s, e, "Start training") != NULL || FIND(s, e, "Loading checkpoint from ") != NULL
            ? PYTHON : SKIP;
    for (c = FIND(s, e, "iter: "); c != NULL; c = FIND(c + 1, e, "iter: ")) {
        q = digits(c + 6, e);
        if (q > c + 6 && STARTS(q, e, "  ")
                && (mend = maskrcnn_meters(q + 2, e, &time, &data)) != NULL)
            break;
    }
    if (mend == NULL)
        return PYTHON;   /* unmatched: an error, which Python writes */
    loss = field_after(c, mend, "  loss: ", 8);
    mem = field_after(mend, e, "max mem: ", 9);
    if (!to_int(TOK(c + 6, q), &r->iteration)
            || !timed_pair(time, &r->time_s, data, &r->data_s, &r->has_data, &r->rounding)
            || !opt_double(mem, &r->mem, &r->has_mem) || !opt_double(loss, &r->loss, &r->has_loss))
        return PYTHON;
    r->span = r->iteration;
    if (r->iteration <= st->last)
        return PYTHON;   /* accept() decides */
    st->last = r->iteration;
    r->has_data = 1;
    r->kind = KIND_CUMULATIVE_MEAN;
    return RECORD;
}
