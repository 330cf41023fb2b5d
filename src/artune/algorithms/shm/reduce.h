/* The reductions of the compiled shared-memory round: reduce.c. */
#ifndef ARTUNE_SHM_REDUCE_H
#define ARTUNE_SHM_REDUCE_H

#include <stddef.h>

/* dtype codes: channel.py DTYPE_CODES */
enum { DT_F32 = 1, DT_F16, DT_BF16, DT_F64, DT_I8, DT_U8, DT_I16, DT_I32, DT_I64 };
/* op codes: channel.py OP_CODES */
enum { OP_SUM = 1, OP_MAX, OP_MIN };

/* out[i] = srcs[0][i] op srcs[1][i] op ... (left to right) for n elements; out may be one of the
 * sources; out2, when not NULL, gets a copy of out */
typedef void (*reduce_fn)(const void *const *srcs, int nsrc, void *out, void *out2, ptrdiff_t n);

/* the reduction for a dtype and op code, or NULL */
reduce_fn pick_reduce(int dtype, int op);

/* choose the fp16 conversions this CPU has (F16C on x86-64); call once, before any reduction */
void pick_f16_conversions(void);

#endif
