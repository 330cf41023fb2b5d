/*
 * artune.algorithms.shm._native: the compiled shared-memory round.
 *
 * One call of a Step does a whole all-reduce (every chunk of it): write this
 * rank's slot and header, publish, wait for every peer, check the headers,
 * reduce, and (two-shot) publish the reduced slice and gather the others. It
 * is the fast implementation of the round that channel.py describes and
 * implements in Python; the segment layout, the headers, the semaphores and
 * the failure handling are that module's. A native rank and a Python rank
 * interoperate in one group.
 *
 * Memory ordering (correct on any CPU: the C11 model, not x86's)
 * --------------------------------------------------------------
 * Each slot's header starts with its sequence word (the header's ``seq``
 * field) and holds a second one at byte 64 (``REDUCED_OFF``, two-shot's second
 * round). A native writer stores its data and header fields with plain
 * stores, then stores the sequence word with memory_order_release, then posts
 * the (receiver, sender) semaphore of every peer. A native reader waits until
 * (1) an acquire load of the peer's sequence word returns this step's seq and
 * (2) its sem_trywait on that peer's semaphore succeeds, and only then reads
 * the peer's header and data. (1) synchronises with the writer's release
 * store, so every write before it is visible (C11 5.1.2.4: release/acquire on
 * the same atomic object). (2) is what makes a Python writer safe: it cannot
 * do a release store, but its sem_post is a release and a successful
 * sem_trywait an acquire (POSIX XBD 4.12 "memory synchronization"; glibc
 * implements them with C11 release/acquire atomics), and the Python writer
 * posts after writing. (2) also keeps the semaphores' counts matched round by
 * round, which the blocking path, the "who is missing" report and Python
 * ranks rely on (see channel.py). Taking (1) first makes the spin watch the
 * header's cache line, which the reader reads next anyway.
 *
 * Reuse of a buffer: a rank writes buffer s % 2 again only in step s + 2,
 * after its wait in step s + 1, which needs every peer's post of step s + 1,
 * made after that peer finished reading step s (channel.py, "two buffers").
 * So a sequence word a reader watches holds s - 2 until it turns to s.
 *
 * Waits spin (pure spin, then with sched_yield), dropping the GIL once they
 * last more than a few hundred nanoseconds, then hand over to the Python
 * blocking path (ShmChannel._wait_blocking: deadlines, liveness checks,
 * PeerTimeout) with the GIL held. A wait whose peer last waited on this
 * rank's own CPU (the int32 at CPU_OFF of its header, a relaxed hint) skips
 * the pure spin: two ranks that the scheduler put on one core otherwise pay
 * the whole spin on every call (about 25 us a call instead of 5 at 2 KiB on a
 * 2-core VM, docs/results/shm-defaults.md).
 *
 * The reductions are reduce.c's: bit-identical to the Python round's.
 *
 * Router (at the end) is the Communicator's fast path: a repeated call goes
 * from Python straight to the route bound on its first sight (a Step, or
 * any bound callable, after its agreement round).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "reduce.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the segment's headers are little-endian ('<' in channel.py)"
#endif
#if ATOMIC_LLONG_LOCK_FREE != 2
#error "needs lock-free 64-bit atomics"
#endif

#define REDUCED_OFF 64 /* byte offset of the second sequence word in a slot's header */
#define HDR_LEN 40     /* struct "<qqqiiii" */
#define CPU_OFF 40     /* int32 after the header: 1 + the CPU of its writer's last wait, 0 if not known */

typedef struct {
    int64_t seq, numel, chunk;
    int32_t index, dtype, op, algorithm;
} header_t;
_Static_assert(sizeof(header_t) == HDR_LEN, "header layout");

/* ------------------------------------------------------------------ channel */

typedef struct {
    PyObject_HEAD
    Py_buffer mem;  /* the segment's mapping (held until close) */
    Py_buffer box;  /* the channel's step counter: array('q', [seq]) shared with Python */
    char *base;
    int64_t *seq;
    int world, rank, npeers, state;
    Py_ssize_t slot_stride, buffer_stride, header_bytes, capacity;
    int *peers;     /* peer ranks, in the order of send/recv */
    sem_t **send;   /* sem(peer, rank): we post it */
    sem_t **recv;   /* sem(rank, peer): we wait on it */
    double spin_s, yield_s;
    int32_t cpu;            /* 1 + the CPU this rank's last wait ran on (0: not known): the hint it posts */
    long long shared_waits; /* waits that found their peer on this rank's CPU and yielded at once */
    PyObject *wait_blocking, *raise_mismatch, *mark_broken, *check_open;
} Channel;

static inline char *hdr_at(Channel *c, int buf, int r) {
    return c->base + buf * c->buffer_stride + r * c->slot_stride;
}
static inline char *data_at(Channel *c, int buf, int r) { return hdr_at(c, buf, r) + c->header_bytes; }

static void channel_release(Channel *c) {
    for (int i = 0; i < c->npeers; i++) {
        if (c->send && c->send[i]) sem_close(c->send[i]);
        if (c->recv && c->recv[i]) sem_close(c->recv[i]);
    }
    PyMem_Free(c->send); PyMem_Free(c->recv); PyMem_Free(c->peers);
    c->send = c->recv = NULL; c->peers = NULL; c->npeers = 0;
    if (c->mem.obj) PyBuffer_Release(&c->mem);
    if (c->box.obj) PyBuffer_Release(&c->box);
    c->base = NULL; c->seq = NULL;
    c->state = 2;
}

static int channel_clear(Channel *c) {
    Py_CLEAR(c->wait_blocking); Py_CLEAR(c->raise_mismatch);
    Py_CLEAR(c->mark_broken); Py_CLEAR(c->check_open);
    return 0;
}

static int channel_traverse(Channel *c, visitproc visit, void *arg) {
    Py_VISIT(c->wait_blocking); Py_VISIT(c->raise_mismatch);
    Py_VISIT(c->mark_broken); Py_VISIT(c->check_open);
    if (c->mem.obj) Py_VISIT(c->mem.obj);
    if (c->box.obj) Py_VISIT(c->box.obj);
    return 0;
}

static void channel_dealloc(Channel *c) {
    PyObject_GC_UnTrack(c);
    channel_clear(c);
    channel_release(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static sem_t *open_sem(PyObject *name) {
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return NULL;
    sem_t *sem = sem_open(s, 0);
    if (sem == SEM_FAILED) {
        PyErr_Format(PyExc_OSError, "cannot open semaphore %s: %s", s, strerror(errno));
        return NULL;
    }
    return sem;
}

/* Channel(mm, world, rank, slot_stride, buffer_stride, header_bytes, peers, send_names, recv_names) */
static int channel_init(Channel *c, PyObject *args, PyObject *kw) {
    PyObject *mm, *peers, *send_names, *recv_names;
    if (!PyArg_ParseTuple(args, "OiinnnOOO", &mm, &c->world, &c->rank, &c->slot_stride, &c->buffer_stride,
                          &c->header_bytes, &peers, &send_names, &recv_names))
        return -1;
    if (c->base) { PyErr_SetString(PyExc_RuntimeError, "already initialised"); return -1; }
    Py_ssize_t n = PySequence_Size(peers);
    if (n != c->world - 1 || PySequence_Size(send_names) != n || PySequence_Size(recv_names) != n) {
        PyErr_SetString(PyExc_ValueError, "peers and semaphore names must list world_size - 1 peers");
        return -1;
    }
    if (PyObject_GetBuffer(mm, &c->mem, PyBUF_WRITABLE) < 0) return -1;
    if (c->mem.len < 2 * c->buffer_stride) {
        PyErr_SetString(PyExc_ValueError, "the mapping is smaller than the layout");
        channel_release(c);
        return -1;
    }
    c->base = c->mem.buf;
    c->capacity = c->slot_stride - c->header_bytes;
    c->peers = PyMem_Calloc(n ? n : 1, sizeof(int));
    c->send = PyMem_Calloc(n ? n : 1, sizeof(sem_t *));
    c->recv = PyMem_Calloc(n ? n : 1, sizeof(sem_t *));
    if (!c->peers || !c->send || !c->recv) { channel_release(c); PyErr_NoMemory(); return -1; }
    c->npeers = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_GetItem(peers, i), *s = PySequence_GetItem(send_names, i),
                 *r = PySequence_GetItem(recv_names, i);
        int ok = p && s && r;
        if (ok) {
            c->peers[i] = (int)PyLong_AsLong(p);
            ok = !PyErr_Occurred() && (c->send[i] = open_sem(s)) && (c->recv[i] = open_sem(r));
        }
        Py_XDECREF(p); Py_XDECREF(s); Py_XDECREF(r);
        if (!ok) { channel_release(c); return -1; }
    }
    c->state = 0;
    return 0;
}

/* configure(seq_box, spin_s, yield_s, wait_blocking, raise_mismatch, mark_broken, check_open) */
static PyObject *channel_configure(Channel *c, PyObject *args) {
    PyObject *box, *wb, *rm, *mb, *co;
    if (!PyArg_ParseTuple(args, "OddOOOO", &box, &c->spin_s, &c->yield_s, &wb, &rm, &mb, &co)) return NULL;
    if (!c->base) { PyErr_SetString(PyExc_RuntimeError, "the channel is closed"); return NULL; }
    if (c->box.obj) PyBuffer_Release(&c->box);
    if (PyObject_GetBuffer(box, &c->box, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) return NULL;
    if (c->box.len != 8 || !c->box.format || strcmp(c->box.format, "q") != 0) {
        PyBuffer_Release(&c->box);
        PyErr_SetString(PyExc_TypeError, "seq_box must be array('q', [seq])");
        return NULL;
    }
    c->seq = c->box.buf;
    Py_INCREF(wb); Py_INCREF(rm); Py_INCREF(mb); Py_INCREF(co);
    channel_clear(c);
    c->wait_blocking = wb; c->raise_mismatch = rm; c->mark_broken = mb; c->check_open = co;
    Py_RETURN_NONE;
}

static PyObject *channel_close(Channel *c, PyObject *unused) {
    /* check_open stays: a step bound before the close still raises the channel's own error */
    Py_CLEAR(c->wait_blocking); Py_CLEAR(c->raise_mismatch); Py_CLEAR(c->mark_broken);
    channel_release(c);
    Py_RETURN_NONE;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The GIL is released lazily: a call holds it while it copies and reduces small chunks and while
 * its wait is short (the common case at a few KiB, where taking and dropping it would cost a tenth
 * of the round), and drops it once a wait lasts or a chunk is large. *ts is NULL while held. */
#define RELEASE_FROM_BYTES (64 << 10)
static inline void gil_release(PyThreadState **ts) {
    if (!*ts) *ts = PyEval_SaveThread();
}
static inline void gil_take(PyThreadState **ts) {
    if (*ts) {
        PyEval_RestoreThread(*ts);
        *ts = NULL;
    }
}

/* The peer last waited on the CPU we run on: it can run only when we give the core up, so
 * spinning would just hold it off (a rank woken by a socket is often put on its waker's CPU).
 * A hint, not a synchronisation: a stale or unknown value costs time, never correctness. Our
 * own CPU is looked up here, when a wait begins, and posted with our next steps: the fast path
 * (the peer already there) makes no call. */
static inline int shares_cpu(Channel *c, const char *hdr) {
    int cpu = sched_getcpu();
    c->cpu = cpu < 0 ? 0 : cpu + 1;
    return c->cpu && atomic_load_explicit((_Atomic int32_t *)(hdr + CPU_OFF), memory_order_relaxed) == c->cpu;
}

static inline int arrived(const char *hdr, int64_t want, int64_t off) {
    return atomic_load_explicit((_Atomic int64_t *)(hdr + off), memory_order_acquire) == want;
}

/* Wait for every peer's post of this round (see the ordering note at the top). word_off is the
 * sequence word to watch (0: the header's seq, REDUCED_OFF: two-shot's second round). Drops the GIL
 * after the first few hundred nanoseconds of waiting; returns -1 with an exception set. */
static int wait_peers(Channel *c, int buf, int64_t seq, int64_t word_off, PyThreadState **ts) {
    double start = 0, spin_until = 0, yield_until = 0;
    for (int i = 0; i < c->npeers; i++) {
        const char *hdr = hdr_at(c, buf, c->peers[i]);
        int seen = 0, hinted = 0;
        unsigned long k = 0;
        for (;;) {
            if (!seen) seen = arrived(hdr, seq, word_off);
            if (seen && sem_trywait(c->recv[i]) == 0) break;
            if (start == 0) {
                start = now_s();
                spin_until = start + c->spin_s;
                yield_until = spin_until + c->yield_s;
            }
            if (!hinted) {
                hinted = 1;
                if (shares_cpu(c, hdr)) {
                    spin_until = 0; /* yield from the first check on */
                    c->shared_waits++;
                }
            }
            if ((++k & 15) == 0) {
                gil_release(ts);
                double t = now_s();
                if (t >= yield_until) {
                    /* hand over: the Python path waits, with deadline and liveness checks, for peers i.. */
                    gil_take(ts);
                    PyObject *r = PyObject_CallFunction(c->wait_blocking, "i", i);
                    Py_XDECREF(r);
                    if (r && !c->base) { /* closed from a callback: nothing more to touch */
                        PyErr_SetString(PyExc_RuntimeError, "the shared-memory channel was closed during a step");
                        r = NULL;
                    }
                    return r ? 0 : -1;
                }
                if (t >= spin_until) sched_yield();
            } else {
                cpu_relax();
            }
        }
    }
    return 0;
}

static inline void post_peers(Channel *c) {
    for (int i = 0; i < c->npeers; i++) sem_post(c->send[i]);
}

static PyMethodDef channel_methods[] = {
    {"configure", (PyCFunction)channel_configure, METH_VARARGS,
     "configure(seq_box, spin_s, yield_s, wait_blocking, raise_mismatch, mark_broken, check_open)"},
    {"close", (PyCFunction)channel_close, METH_NOARGS, "Release the mapping and the semaphores; idempotent."},
    {NULL},
};

static PyMemberDef channel_members[] = {
    {"state", T_INT, offsetof(Channel, state), 0, "0 open, 1 broken, 2 closed (mirrors ShmChannel)"},
    {"shared_waits", T_LONGLONG, offsetof(Channel, shared_waits), READONLY,
     "waits that found their peer's last wait on this rank's CPU, so yielded it at once"},
    {NULL},
};

static PyTypeObject ChannelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "artune.algorithms.shm._native.Channel",
    .tp_doc = "This rank's view of a ShmChannel's segment and semaphores, for the compiled round.",
    .tp_basicsize = sizeof(Channel),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)channel_init,
    .tp_dealloc = (destructor)channel_dealloc,
    .tp_traverse = (traverseproc)channel_traverse,
    .tp_clear = (inquiry)channel_clear,
    .tp_methods = channel_methods,
    .tp_members = channel_members,
};

/* ------------------------------------------------------------------ step */

enum { ONE_SHOT = 1, TWO_SHOT = 2 };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Channel *ch;
    int algo;
    reduce_fn reduce;
    Py_ssize_t itemsize, n, per_chunk;
    header_t hdr; /* seq and index filled per step */
} Step;

static PyObject *str_data_ptr, *str_numel;

static inline void write_header(Channel *c, int buf, const header_t *h) {
    char *dst = hdr_at(c, buf, c->rank);
    memcpy(dst + 8, (const char *)h + 8, HDR_LEN - 8);
    atomic_store_explicit((_Atomic int32_t *)(dst + CPU_OFF), c->cpu, memory_order_relaxed);
    atomic_store_explicit((_Atomic int64_t *)dst, h->seq, memory_order_release);
}

/* one channel step over m elements at x; 0, or -1 with an exception set */
static int run_step(Step *s, char *x, Py_ssize_t m, int32_t index, PyThreadState **ts) {
    Channel *c = s->ch;
    const Py_ssize_t isz = s->itemsize;
    const int world = c->world, rank = c->rank;
    int64_t seq = (*c->seq)++;
    int buf = (int)(seq & 1);
    char *mine = data_at(c, buf, rank);
    header_t h = s->hdr;
    h.seq = seq;
    h.index = index;
    const void *srcs[64];
    Py_ssize_t lo = 0, hi = m;
    if (m * isz >= RELEASE_FROM_BYTES) gil_release(ts);
    if (s->algo == TWO_SHOT) {
        lo = m * rank / world;
        hi = m * (rank + 1) / world;
        /* peers read only their own slice of our slot */
        if (m) {
            memcpy(mine, x, lo * isz);
            memcpy(mine + hi * isz, x + hi * isz, (m - hi) * isz);
        }
    } else if (m) {
        memcpy(mine, x, m * isz);
    }
    write_header(c, buf, &h);
    post_peers(c);
    if (wait_peers(c, buf, seq, 0, ts) < 0) return -1;
    const char *own = hdr_at(c, buf, rank);
    for (int i = 0; i < c->npeers; i++) {
        if (memcmp(hdr_at(c, buf, c->peers[i]), own, HDR_LEN) != 0) {
            gil_take(ts);
            PyObject *r = PyObject_CallFunction(c->raise_mismatch, "i", buf);
            Py_XDECREF(r);
            if (!r) return -2; /* CallMismatch: every rank saw it, the channel stays usable */
            PyErr_SetString(PyExc_RuntimeError, "raise_mismatch returned");
            return -1;
        }
    }
    if (!m) return 0;
    for (int r = 0; r < world; r++)
        srcs[r] = (r == rank ? x : data_at(c, buf, r)) + lo * isz; /* our own data straight from x */
    if (s->algo == ONE_SHOT) {
        s->reduce(srcs, world, x, NULL, m);
        return 0;
    }
    /* two-shot: reduce our slice into x and our slot, publish it, then gather the others' slices */
    s->reduce(srcs, world, x + lo * isz, mine + lo * isz, hi - lo);
    atomic_store_explicit((_Atomic int64_t *)(hdr_at(c, buf, rank) + REDUCED_OFF), seq, memory_order_release);
    post_peers(c);
    if (wait_peers(c, buf, seq, REDUCED_OFF, ts) < 0) return -1;
    for (int r = 0; r < world; r++) {
        if (r == rank) continue;
        Py_ssize_t a = m * r / world, b = m * (r + 1) / world;
        memcpy(x + a * isz, data_at(c, buf, r) + a * isz, (b - a) * isz);
    }
    return 0;
}

/* The whole all-reduce of the n elements at x (every chunk); 0, or -1 with an exception set. */
static int step_run(Step *s, char *x) {
    Channel *c = s->ch;
    if (c->state) {
        if (c->check_open) {
            PyObject *r = PyObject_CallNoArgs(c->check_open);
            if (!r) return -1;
            Py_DECREF(r);
        }
        if (c->state == 2 || !c->base) {
            PyErr_SetString(PyExc_RuntimeError, "the shared-memory channel is closed");
            return -1;
        }
    }
    Py_INCREF(c); /* a callback could close the channel; its memory stays until we return */
    PyThreadState *ts = NULL; /* GIL held */
    int rc = 0;
    const Py_ssize_t n = s->n, per = s->per_chunk, isz = s->itemsize;
    if (n <= per) {
        rc = run_step(s, x, n, 0, &ts);
    } else {
        int32_t index = 0;
        for (Py_ssize_t lo = 0; lo < n && rc == 0; lo += per, index++)
            rc = run_step(s, x + lo * isz, n - lo < per ? n - lo : per, index, &ts);
    }
    gil_take(&ts);
    if (rc == -1 && c->mark_broken) {
        /* a failed or interrupted wait: the rounds can no longer be matched */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *why = PyUnicode_FromFormat("interrupted by %s", type ? ((PyTypeObject *)type)->tp_name : "an error");
        PyObject *r = why ? PyObject_CallOneArg(c->mark_broken, why) : NULL;
        Py_XDECREF(why);
        Py_XDECREF(r);
        if (!r) PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    Py_DECREF(c);
    return rc ? -1 : 0;
}

/* tensor.<name>() through the vectorcall protocol: a new reference, or NULL with an exception set */
static inline PyObject *call_method0(PyObject *name, PyObject *const *self) {
    return PyObject_VectorcallMethod(name, (PyObject **)self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* tensor.data_ptr() as an address; NULL with an exception set on failure */
static char *tensor_address(PyObject *const *tensor) {
    PyObject *ptr = call_method0(str_data_ptr, tensor);
    if (!ptr) return NULL;
    char *x = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    return x || PyErr_Occurred() ? x : (char *)""; /* an empty tensor may sit at address 0: no byte is touched */
}

static PyObject *step_vectorcall(Step *s, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames) {
        PyErr_SetString(PyExc_TypeError, "step(tensor) takes one tensor");
        return NULL;
    }
    /* the bound size is what the raw copies trust: a tensor of another size is refused, not overrun */
    PyObject *numel = call_method0(str_numel, args);
    if (!numel) return NULL;
    Py_ssize_t got = PyLong_AsSsize_t(numel);
    Py_DECREF(numel);
    if (got != s->n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "this all-reduce is bound to %zd elements, got a tensor of %zd", s->n, got);
        return NULL;
    }
    char *x = tensor_address(args);
    if (!x || step_run(s, x) < 0) return NULL;
    Py_RETURN_NONE;
}

static int step_traverse(Step *s, visitproc visit, void *arg) { Py_VISIT(s->ch); return 0; }
static int step_clear(Step *s) { Py_CLEAR(s->ch); return 0; }
static void step_dealloc(Step *s) {
    PyObject_GC_UnTrack(s);
    step_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "artune.algorithms.shm._native.Step",
    .tp_doc = "A bound all-reduce: step(tensor) reduces the contiguous tensor in place over the channel.",
    .tp_basicsize = sizeof(Step),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Step, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)step_dealloc,
    .tp_traverse = (traverseproc)step_traverse,
    .tp_clear = (inquiry)step_clear,
};

/* ------------------------------------------------------------------ router */

/* The Communicator's fast path (artune.communicator.fastpath): up to ROUTES call signatures, each with
 * the route the general path bound on its first sight, so that a repeated all-reduce goes from Python
 * straight to its bound call, whatever runs it (more signatures than that replace the oldest; a miss
 * only costs the general path). A route matches on the identity of the call's dtype, op and key, on
 * the element count and on the device (a CPU tensor, or a CUDA tensor on the route's device); the
 * tensor must be contiguous, and one that requires grad takes the general path unless a Step runs it
 * (which reads its memory, outside autograd). Anything else returns False and the caller takes its
 * general path, which also added the route on first sight.
 *
 * A route is: its agreement (NULL: the call compares itself, as a Step's header round does; a Step of
 * no elements: a compiled header-only round; or a callable of no arguments), its run (a Step, or a
 * callable of the tensor), and for CUDA routes the run inside a graph capture (no agreement: nothing
 * inside a capture talks to peers). The capture test, the router's `capturing` callable, is made once
 * per call of a CUDA route and never for a CPU one (CPU work is never captured). The busy flag is the
 * Communicator's guard against overlapping calls from threads (a wait drops the GIL), for both paths. */
#define ROUTES 16

typedef struct {
    PyObject *dtype, *op, *key;
    Py_ssize_t numel;
    int device;        /* -1: CPU tensors; >= 0: CUDA tensors on that device */
    PyObject *agree;   /* NULL, a Step of no elements, or a callable of no arguments */
    PyObject *run;     /* a Step, or a callable of the tensor */
    PyObject *graph;   /* CUDA routes: the run inside a capture; NULL for CPU ones */
} route_t;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    atomic_int busy;
    int count, next; /* routes in use; the one a full table replaces next */
    unsigned long long hits; /* calls it ran; written only while busy, so one writer at a time */
    PyObject *capturing;     /* () -> bool: the current CUDA stream captures a graph; NULL: never */
    route_t routes[ROUTES];
} Router;

static PyObject *str_dtype, *str_is_cpu, *str_is_cuda, *str_is_contiguous, *str_requires_grad, *str_get_device;

static void route_release(route_t *r) {
    Py_XDECREF(r->dtype); Py_XDECREF(r->op); Py_XDECREF(r->key);
    Py_XDECREF(r->agree); Py_XDECREF(r->run); Py_XDECREF(r->graph);
}

static int router_clear(Router *rt) {
    route_t old[ROUTES];
    int n = rt->count;
    memcpy(old, rt->routes, sizeof old);
    memset(rt->routes, 0, sizeof rt->routes);
    rt->count = rt->next = 0;
    for (int i = 0; i < n; i++) route_release(&old[i]); /* after the table is empty: a destructor sees no half-cleared entry */
    return 0;
}

/* a tensor's boolean attribute: 1, 0, or -1 with an exception set */
static inline int tensor_flag(PyObject *tensor, PyObject *name) {
    PyObject *flag = PyObject_GetAttr(tensor, name);
    if (!flag) return -1;
    Py_DECREF(flag);
    return flag == Py_True;
}

/* The CUDA device index of a tensor, -1 when it is not a CUDA tensor, -2 with an exception set. */
static int cuda_device(PyObject *const *tensor) {
    int cuda = tensor_flag(tensor[0], str_is_cuda);
    if (cuda <= 0) return cuda - 1;
    PyObject *index = call_method0(str_get_device, tensor);
    if (!index) return -2;
    long d = PyLong_AsLong(index);
    Py_DECREF(index);
    return d == -1 && PyErr_Occurred() ? -2 : (int)d;
}

/* run one part of a route: a Step over x (NULL: an agreement, no data), or a callable */
static inline int run_part(PyObject *part, char *x, PyObject *const *tensor) {
    if (Py_IS_TYPE(part, &StepType)) return step_run((Step *)part, x ? x : (char *)"") < 0 ? -1 : 0;
    PyObject *r = tensor ? PyObject_CallOneArg(part, tensor[0]) : PyObject_CallNoArgs(part);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* router(tensor, op, key) -> True when it ran the all-reduce, False when the caller must */
static PyObject *router_vectorcall(Router *rt, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 3 || kwnames) {
        PyErr_SetString(PyExc_TypeError, "router(tensor, op, key) takes three arguments");
        return NULL;
    }
    if (!rt->count) Py_RETURN_FALSE;
    PyObject *dtype = PyObject_GetAttr(args[0], str_dtype);
    if (!dtype) return NULL;
    Py_DECREF(dtype); /* compared by identity only: a matching route holds a reference to it */
    PyObject *numel = call_method0(str_numel, args);
    if (!numel) return NULL;
    Py_ssize_t n = PyLong_AsSsize_t(numel);
    Py_DECREF(numel);
    if (n == -1 && PyErr_Occurred()) return NULL;
    const route_t *r = NULL;
    int cpu = -1, device = -3; /* asked once, at the first route they decide */
    for (int i = 0; i < rt->count && !r; i++) {
        const route_t *c = &rt->routes[i];
        if (c->numel != n || c->dtype != dtype || c->op != args[1] || c->key != args[2]) continue;
        if (c->device < 0) {
            if (cpu < 0 && (cpu = tensor_flag(args[0], str_is_cpu)) < 0) return NULL;
            if (cpu) r = c;
        } else {
            if (device == -3 && (device = cuda_device(args)) == -2) return NULL;
            if (device == c->device) r = c;
        }
    }
    if (!r) Py_RETURN_FALSE;
    /* the route's parts, held from here on: what runs below (a tensor subclass's methods, the capture
     * test, the parts themselves) may clear or replace the table's entries */
    const int cuda = r->device >= 0;
    PyObject *agree = Py_XNewRef(r->agree), *run = Py_NewRef(r->run), *graph = Py_XNewRef(r->graph);
    PyObject *result = NULL;
    PyObject *contiguous = call_method0(str_is_contiguous, args);
    if (!contiguous) goto done;
    Py_DECREF(contiguous);
    if (contiguous != Py_True) goto decline;
    if (!Py_IS_TYPE(run, &StepType) || (graph && !Py_IS_TYPE(graph, &StepType))) {
        int grad = tensor_flag(args[0], str_requires_grad);
        if (grad < 0) goto done;
        if (grad) goto decline; /* the general path runs it detached */
    }
    if (cuda && rt->capturing) {
        PyObject *captured = PyObject_CallNoArgs(rt->capturing);
        if (!captured) goto done;
        Py_DECREF(captured);
        if (captured == Py_True) { /* the graph route: nothing inside a capture talks to peers */
            if (!graph) goto decline;
            Py_CLEAR(agree);
            Py_SETREF(run, Py_NewRef(graph));
        }
    }
    const int stepped = Py_IS_TYPE(run, &StepType);
    char *x = NULL;
    if (stepped && !(x = tensor_address(args))) goto done;
    int idle = 0;
    if (!atomic_compare_exchange_strong(&rt->busy, &idle, 1)) goto decline; /* the caller's guard reports it */
    int rc = agree ? run_part(agree, NULL, NULL) : 0;
    if (rc == 0) rc = run_part(run, x, stepped ? NULL : args);
    if (rc == 0) rt->hits++;
    atomic_store(&rt->busy, 0);
    if (rc == 0) result = Py_NewRef(Py_True);
    goto done;
decline:
    result = Py_NewRef(Py_False);
done:
    Py_XDECREF(agree);
    Py_DECREF(run);
    Py_XDECREF(graph);
    return result;
}

static int route_part(PyObject *part, const char *what, int none_ok, Py_ssize_t numel) {
    if (part == Py_None) {
        if (none_ok) return 0;
    } else if (Py_IS_TYPE(part, &StepType)) {
        if (((Step *)part)->n == numel) return 0;
    } else if (PyCallable_Check(part)) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "Router.add(): %s must be %sa Step of %zd elements or a callable", what,
                 none_ok ? "None, " : "", numel);
    return -1;
}

/* add(dtype, op, key, numel, device, agree, run, graph) -> True: remember a signature's route */
static PyObject *router_add(Router *rt, PyObject *args) {
    PyObject *dtype, *op, *key, *agree, *run, *graph;
    Py_ssize_t numel;
    int device;
    if (!PyArg_ParseTuple(args, "OOOniOOO", &dtype, &op, &key, &numel, &device, &agree, &run, &graph)) return NULL;
    if (route_part(agree, "agree", 1, 0) < 0 || route_part(run, "run", 0, numel) < 0 ||
        route_part(graph, "graph", 1, numel) < 0)
        return NULL;
    if (device < -1 || (device == -1 && graph != Py_None)) {
        PyErr_SetString(PyExc_ValueError, "Router.add(): device is -1 (CPU, no graph route) or a CUDA index");
        return NULL;
    }
    if (device >= 0 && (Py_IS_TYPE(run, &StepType) || Py_IS_TYPE(graph, &StepType))) {
        PyErr_SetString(PyExc_ValueError, "Router.add(): a Step reduces host memory, not a CUDA tensor's");
        return NULL;
    }
    int i = 0; /* the signature's own entry when it has one (routed again), else a free one, else the oldest */
    while (i < rt->count && !(rt->routes[i].numel == numel && rt->routes[i].dtype == dtype &&
                              rt->routes[i].op == op && rt->routes[i].key == key && rt->routes[i].device == device))
        i++;
    if (i == rt->count) {
        if (rt->count < ROUTES) {
            rt->count++;
        } else {
            i = rt->next;
            rt->next = (rt->next + 1) % ROUTES;
        }
    }
    route_t *r = &rt->routes[i], old = *r;
    r->dtype = Py_NewRef(dtype);
    r->op = Py_NewRef(op);
    r->key = Py_NewRef(key);
    r->numel = numel;
    r->device = device;
    r->agree = agree == Py_None ? NULL : Py_NewRef(agree);
    r->run = Py_NewRef(run);
    r->graph = graph == Py_None ? NULL : Py_NewRef(graph);
    route_release(&old); /* last: a destructor it runs sees a consistent table */
    Py_RETURN_TRUE;
}

static PyObject *router_clear_method(Router *rt, PyObject *unused) {
    router_clear(rt);
    Py_RETURN_NONE;
}

static PyObject *router_enter(Router *rt, PyObject *unused) {
    int idle = 0;
    return PyBool_FromLong(atomic_compare_exchange_strong(&rt->busy, &idle, 1));
}

static PyObject *router_leave(Router *rt, PyObject *unused) {
    atomic_store(&rt->busy, 0);
    Py_RETURN_NONE;
}

static PyObject *router_busy(Router *rt, void *unused) { return PyBool_FromLong(atomic_load(&rt->busy)); }

static PyObject *router_hits(Router *rt, void *unused) { return PyLong_FromUnsignedLongLong(rt->hits); }

static PyGetSetDef router_getset[] = {
    {"busy", (getter)router_busy, NULL, "True while a call runs.", NULL},
    {"hits", (getter)router_hits, NULL, "How many calls it ran.", NULL},
    {NULL},
};

/* Router(capturing=None): capturing() says whether the current CUDA stream captures a graph */
static PyObject *router_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"capturing", NULL};
    PyObject *capturing = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Router", names, &capturing)) return NULL;
    if (capturing != Py_None && !PyCallable_Check(capturing)) {
        PyErr_SetString(PyExc_TypeError, "Router(capturing): a callable of no arguments, or None");
        return NULL;
    }
    Router *rt = (Router *)type->tp_alloc(type, 0); /* zeroed: no routes, idle */
    if (!rt) return NULL;
    rt->vectorcall = (vectorcallfunc)router_vectorcall;
    rt->capturing = capturing == Py_None ? NULL : Py_NewRef(capturing);
    return (PyObject *)rt;
}

static int router_traverse(Router *rt, visitproc visit, void *arg) {
    Py_VISIT(rt->capturing);
    for (int i = 0; i < rt->count; i++) {
        const route_t *r = &rt->routes[i];
        Py_VISIT(r->dtype); Py_VISIT(r->op); Py_VISIT(r->key);
        Py_VISIT(r->agree); Py_VISIT(r->run); Py_VISIT(r->graph);
    }
    return 0;
}

static int router_gc_clear(Router *rt) {
    Py_CLEAR(rt->capturing);
    return router_clear(rt);
}

static void router_dealloc(Router *rt) {
    PyObject_GC_UnTrack(rt);
    router_gc_clear(rt);
    Py_TYPE(rt)->tp_free((PyObject *)rt);
}

static PyMethodDef router_methods[] = {
    {"add", (PyCFunction)router_add, METH_VARARGS,
     "add(dtype, op, key, numel, device, agree, run, graph) -> True: remember a signature's route "
     "(device -1: CPU tensors, else the CUDA index; agree and graph may be None)"},
    {"clear", (PyCFunction)router_clear_method, METH_NOARGS, "Forget every route."},
    {"enter", (PyCFunction)router_enter, METH_NOARGS, "Mark a call as running: False when one already is."},
    {"leave", (PyCFunction)router_leave, METH_NOARGS, "Mark the running call as done."},
    {NULL},
};

static PyTypeObject RouterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "artune.algorithms.shm._native.Router",
    .tp_doc = "router(tensor, op, key) -> bool: run a remembered route, or say the caller must.",
    .tp_basicsize = sizeof(Router),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Router, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = router_new,
    .tp_dealloc = (destructor)router_dealloc,
    .tp_traverse = (traverseproc)router_traverse,
    .tp_clear = (inquiry)router_gc_clear,
    .tp_methods = router_methods,
    .tp_getset = router_getset,
};

/* step(channel, algorithm, n, per_chunk, itemsize, numel, chunk, dtype, op, algorithm_code) */
static PyObject *make_step(PyObject *mod, PyObject *args) {
    Channel *c;
    int algo, dtype, op, code;
    Py_ssize_t n, per, isz;
    long long numel, chunk;
    if (!PyArg_ParseTuple(args, "O!innnLLiii", &ChannelType, &c, &algo, &n, &per, &isz, &numel, &chunk, &dtype,
                          &op, &code))
        return NULL;
    reduce_fn fn = pick_reduce(dtype, op);
    if (!fn) { PyErr_Format(PyExc_ValueError, "no native reduction for dtype code %d, op code %d", dtype, op); return NULL; }
    if ((algo != ONE_SHOT && algo != TWO_SHOT) || per <= 0 || n < 0 || !c->base || c->world > 64 ||
        per * isz > c->capacity) {
        PyErr_SetString(PyExc_ValueError, "bad step parameters");
        return NULL;
    }
    Step *s = PyObject_GC_New(Step, &StepType);
    if (!s) return NULL;
    s->vectorcall = (vectorcallfunc)step_vectorcall;
    Py_INCREF(c);
    s->ch = c;
    s->algo = algo;
    s->reduce = fn;
    s->n = n; s->per_chunk = per; s->itemsize = isz;
    memset(&s->hdr, 0, sizeof s->hdr);
    s->hdr.numel = numel; s->hdr.chunk = chunk;
    s->hdr.dtype = dtype; s->hdr.op = op; s->hdr.algorithm = code;
    PyObject_GC_Track(s);
    return (PyObject *)s;
}

/* reduce(dtype, op, out_address, [source addresses], n): the reduction alone, for tests */
static PyObject *py_reduce(PyObject *mod, PyObject *args) {
    int dtype, op;
    PyObject *srcs_obj, *out_obj;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "iiOOn", &dtype, &op, &out_obj, &srcs_obj, &n)) return NULL;
    reduce_fn fn = pick_reduce(dtype, op);
    if (!fn) { PyErr_SetString(PyExc_ValueError, "no native reduction"); return NULL; }
    Py_ssize_t k = PySequence_Size(srcs_obj);
    if (k < 1 || k > 64) { PyErr_SetString(PyExc_ValueError, "1..64 sources"); return NULL; }
    const void *srcs[64];
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *o = PySequence_GetItem(srcs_obj, i);
        if (!o) return NULL;
        srcs[i] = PyLong_AsVoidPtr(o);
        Py_DECREF(o);
        if (PyErr_Occurred()) return NULL;
    }
    void *out = PyLong_AsVoidPtr(out_obj);
    if (PyErr_Occurred()) return NULL;
    fn(srcs, (int)k, out, NULL, n);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"step", make_step, METH_VARARGS,
     "step(channel, algorithm, n, per_chunk, itemsize, numel, chunk, dtype, op, algorithm_code) -> Step"},
    {"reduce", py_reduce, METH_VARARGS, "reduce(dtype, op, out_address, source_addresses, n)"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native", "The compiled shared-memory round (see channel.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    pick_f16_conversions();
    if (PyType_Ready(&ChannelType) < 0 || PyType_Ready(&StepType) < 0 || PyType_Ready(&RouterType) < 0)
        return NULL;
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_numel = PyUnicode_InternFromString("numel");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_is_cpu = PyUnicode_InternFromString("is_cpu");
    str_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    str_is_cuda = PyUnicode_InternFromString("is_cuda");
    str_requires_grad = PyUnicode_InternFromString("requires_grad");
    str_get_device = PyUnicode_InternFromString("get_device");
    if (!str_data_ptr || !str_numel || !str_dtype || !str_is_cpu || !str_is_contiguous || !str_is_cuda ||
        !str_requires_grad || !str_get_device)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ChannelType);
    if (PyModule_AddObject(m, "Channel", (PyObject *)&ChannelType) < 0) { Py_DECREF(m); return NULL; }
    Py_INCREF(&RouterType);
    if (PyModule_AddObject(m, "Router", (PyObject *)&RouterType) < 0) { Py_DECREF(m); return NULL; }
    if (PyModule_AddIntConstant(m, "ONE_SHOT", ONE_SHOT) < 0 || PyModule_AddIntConstant(m, "TWO_SHOT", TWO_SHOT) < 0 ||
        PyModule_AddIntConstant(m, "REDUCED_OFF", REDUCED_OFF) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
