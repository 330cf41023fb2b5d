/*
 * The reductions of the compiled shared-memory round (see _native.c).
 *
 * They run over blocks of BLOCK elements into a private accumulator (fp32 for
 * half sums), sources in rank order 0, 1, ..., with the same operations and
 * rounding as the Python round (torch's kernels), so results are bit-identical;
 * see the max/min and conversion notes below. Plain C11: the loops are written
 * for the compiler to vectorise, with AVX2 and AVX-512 clones on x86-64.
 */
#include "reduce.h"

#include <stdint.h>
#include <string.h>

#define BLOCK 2048 /* elements per reduction block (8 KiB fp32 accumulator) */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint64_t d2u(double f) { uint64_t u; memcpy(&u, &f, 8); return u; }
static inline double u2d(uint64_t u) { double f; memcpy(&f, &u, 8); return f; }

static inline float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* fp32 -> bf16, round to nearest even; NaN as torch's vectorised copy gives it (0xffff) or as its
 * maximum/minimum give it (0x7fc0) */
static inline uint16_t f32_to_bf16(float f, uint16_t nan) {
    uint32_t u = f2u(f);
    uint16_t r = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return f != f ? nan : r;
}

/* fp16 <-> fp32 without branches, so that the loops around them vectorise */
static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t r = (em << 13) + (112u << 23);       /* rebias the exponent from 15 to 127 */
    r = em >= 0x7c00u ? r + (112u << 23) : r;     /* inf/NaN: exponent all ones, payload kept */
    /* subnormal: m * 2^-24 exactly, as (2^-14 + m * 2^-24) - 2^-14 */
    uint32_t sub = f2u(u2f((em << 13) + (113u << 23)) - u2f(113u << 23));
    return u2f(sign | (em < 0x400u ? sub : r));
}

/* fp32 -> fp16, round to nearest even (as the hardware conversion torch uses); NaN keeps its sign */
static inline uint16_t f32_to_f16(float f) {
    uint32_t u = f2u(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    uint32_t r = a - 0x38000000u; /* a normal half: rebias the exponent from 127 to 15, round to 10 bits */
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    /* below 2^-14 (subnormal or zero): adding 0.5 puts the 2^-24 unit at the mantissa's last bit,
     * and the FPU rounds to nearest even */
    uint32_t sub = f2u(u2f(a) + 0.5f) - 0x3f000000u;
    r = a < 0x38800000u ? sub : r;
    r = a >= 0x477ff000u ? 0x7c00u : r; /* >= 65520 rounds to inf */
    r = a > 0x7f800000u ? 0x7e00u : r;
    return (uint16_t)(sign | r);
}

/* torch's vectorised maximum/minimum (the kernels it runs from 32 elements up; shorter tensors take a
 * scalar loop that breaks ties between +0 and -0 the other way and returns other NaN bits): the
 * second operand unless the first is strictly greater (smaller), a NaN when either is NaN */
#define F_MAX(a, b) ((a) > (b) ? (a) : (b))
#define F_MIN(a, b) ((a) < (b) ? (a) : (b))
#define I_MAX(a, b) ((a) > (b) ? (a) : (b))
#define I_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ADD(a, b) ((a) + (b))

/* out[i] = s[0][i] op s[1][i] op ... (left to right) for one block; acc is private, so the loops
 * vectorise without alias checks. out may equal one of the sources (it is written last). */
#define DEFINE_REDUCE(NAME, T, ACC, LOAD, OPX, STORE)                                          \
    CLONES static void NAME(const void *const *srcs, int nsrc, void *out_, void *out2_, ptrdiff_t n) \
    {                                                                                          \
        ACC acc[BLOCK];                                                                        \
        T *out = (T *)out_, *out2 = (T *)out2_;                                                \
        if (nsrc == 2) { /* one pass; out may be a source, at the same index only */            \
            const T *s0 = (const T *)srcs[0], *s1 = (const T *)srcs[1];                        \
            _Pragma("GCC ivdep") for (ptrdiff_t j = 0; j < n; j++) {                          \
                ACC a = LOAD(s0[j]), b = LOAD(s1[j]);                                          \
                out[j] = STORE(OPX);                                                           \
            }                                                                                  \
            if (out2) memcpy(out2, out, n * sizeof(T));                                        \
            return;                                                                            \
        }                                                                                      \
        for (ptrdiff_t lo = 0; lo < n; lo += BLOCK) {                                         \
            ptrdiff_t len = n - lo < BLOCK ? n - lo : BLOCK;                                  \
            const T *s0 = (const T *)srcs[0] + lo;                                             \
            for (ptrdiff_t j = 0; j < len; j++) acc[j] = LOAD(s0[j]);                         \
            for (int r = 1; r < nsrc; r++) {                                                   \
                const T *s = (const T *)srcs[r] + lo;                                          \
                for (ptrdiff_t j = 0; j < len; j++) {                                         \
                    ACC a = acc[j], b = LOAD(s[j]);                                            \
                    acc[j] = OPX;                                                              \
                }                                                                              \
            }                                                                                  \
            for (ptrdiff_t j = 0; j < len; j++) out[lo + j] = STORE(acc[j]);                  \
            if (out2)                                                                          \
                for (ptrdiff_t j = 0; j < len; j++) out2[lo + j] = out[lo + j];               \
        }                                                                                      \
    }

/* x86-64: AVX2 and AVX-512 versions besides the baseline one, picked at load time (GNU ifunc) */
#if defined(__x86_64__) && defined(__linux__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 8))
#define CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define CLONES
#endif

#define ID(x) (x)
static inline float f_max(float a, float b) {
    float m = F_MAX(a, b);
    return (a != a || b != b) ? u2f(0xffffffffu) : m;
}
static inline float f_min(float a, float b) {
    float m = F_MIN(a, b);
    return (a != a || b != b) ? u2f(0xffffffffu) : m;
}
static inline double d_max(double a, double b) {
    double m = F_MAX(a, b);
    return (a != a || b != b) ? u2d(~(uint64_t)0) : m;
}
static inline double d_min(double a, double b) {
    double m = F_MIN(a, b);
    return (a != a || b != b) ? u2d(~(uint64_t)0) : m;
}
/* half max/min: computed in fp32 (exact for values read from half); NaN becomes canonical on store */
static inline float h_max(float a, float b) { return (a != a || b != b) ? u2f(0x7fc00000u) : F_MAX(a, b); }
static inline float h_min(float a, float b) { return (a != a || b != b) ? u2f(0x7fc00000u) : F_MIN(a, b); }
static inline uint16_t st_bf16_sum(float f) { return f32_to_bf16(f, 0xffffu); }
static inline uint16_t st_bf16_cmp(float f) { return f32_to_bf16(f, 0x7fc0u); }

DEFINE_REDUCE(sum_f32, float, float, ID, a + b, ID)
DEFINE_REDUCE(max_f32, float, float, ID, f_max(a, b), ID)
DEFINE_REDUCE(min_f32, float, float, ID, f_min(a, b), ID)
DEFINE_REDUCE(sum_f64, double, double, ID, a + b, ID)
DEFINE_REDUCE(max_f64, double, double, ID, d_max(a, b), ID)
DEFINE_REDUCE(min_f64, double, double, ID, d_min(a, b), ID)
/* fp16: blocks are converted to fp32 and back, with the F16C instructions where the CPU has them
 * (the conversions torch's kernels use), else with the portable functions above */
static void h2f_soft(const uint16_t *src, float *dst, ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; j++) dst[j] = f16_to_f32(src[j]);
}
static void f2h_soft(const float *src, uint16_t *dst, ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; j++) dst[j] = f32_to_f16(src[j]);
}
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static void h2f_f16c(const uint16_t *src, float *dst, ptrdiff_t n) {
    ptrdiff_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));
    for (; j < n; j++) dst[j] = f16_to_f32(src[j]);
}
__attribute__((target("avx,f16c"))) static void f2h_f16c(const float *src, uint16_t *dst, ptrdiff_t n) {
    ptrdiff_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(dst + j), _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < n; j++) dst[j] = f32_to_f16(src[j]);
}
#endif
static void (*h2f)(const uint16_t *, float *, ptrdiff_t) = h2f_soft;
static void (*f2h)(const float *, uint16_t *, ptrdiff_t) = f2h_soft;

void pick_f16_conversions(void) {
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) {
        h2f = h2f_f16c;
        f2h = f2h_f16c;
    }
#endif
}

#define DEFINE_F16(NAME, OPX, NANFIX)                                                          \
    CLONES static void NAME(const void *const *srcs, int nsrc, void *out_, void *out2_, ptrdiff_t n) \
    {                                                                                          \
        float acc[BLOCK], tmp[BLOCK];                                                          \
        uint16_t *out = (uint16_t *)out_, *out2 = (uint16_t *)out2_;                           \
        for (ptrdiff_t lo = 0; lo < n; lo += BLOCK) {                                         \
            ptrdiff_t len = n - lo < BLOCK ? n - lo : BLOCK;                                  \
            h2f((const uint16_t *)srcs[0] + lo, acc, len);                                     \
            for (int r = 1; r < nsrc; r++) {                                                   \
                h2f((const uint16_t *)srcs[r] + lo, tmp, len);                                 \
                for (ptrdiff_t j = 0; j < len; j++) {                                         \
                    float a = acc[j], b = tmp[j];                                              \
                    acc[j] = OPX;                                                              \
                }                                                                              \
            }                                                                                  \
            NANFIX;                                                                            \
            f2h(acc, out + lo, len);                                                           \
            if (out2) memcpy(out2 + lo, out + lo, len * sizeof(uint16_t));                     \
        }                                                                                      \
    }
/* max/min give torch's canonical NaN (0x7e00): converted from fp32's 0x7fc00000 */
#define F16_CANON for (ptrdiff_t j = 0; j < len; j++) acc[j] = acc[j] != acc[j] ? u2f(0x7fc00000u) : acc[j]
DEFINE_F16(sum_f16, a + b, (void)0)
DEFINE_F16(max_f16, h_max(a, b), F16_CANON)
DEFINE_F16(min_f16, h_min(a, b), F16_CANON)
DEFINE_REDUCE(sum_bf16, uint16_t, float, bf16_to_f32, a + b, st_bf16_sum)
DEFINE_REDUCE(max_bf16, uint16_t, float, bf16_to_f32, h_max(a, b), st_bf16_cmp)
DEFINE_REDUCE(min_bf16, uint16_t, float, bf16_to_f32, h_min(a, b), st_bf16_cmp)
/* integer sums wrap around (as torch's): done in the unsigned type, where that is defined */
#define DEFINE_INT(SUF, T, U)                                              \
    DEFINE_REDUCE(sum_##SUF, T, U, (U), a + b, (T))                        \
    DEFINE_REDUCE(max_##SUF, T, T, ID, I_MAX(a, b), ID)                    \
    DEFINE_REDUCE(min_##SUF, T, T, ID, I_MIN(a, b), ID)
DEFINE_INT(i8, int8_t, uint8_t)
DEFINE_INT(u8, uint8_t, uint8_t)
DEFINE_INT(i16, int16_t, uint16_t)
DEFINE_INT(i32, int32_t, uint32_t)
DEFINE_INT(i64, int64_t, uint64_t)

reduce_fn pick_reduce(int dtype, int op) {
#define PICK(SUF) return op == OP_SUM ? sum_##SUF : op == OP_MAX ? max_##SUF : op == OP_MIN ? min_##SUF : NULL
    switch (dtype) {
    case DT_F32: PICK(f32);
    case DT_F16: PICK(f16);
    case DT_BF16: PICK(bf16);
    case DT_F64: PICK(f64);
    case DT_I8: PICK(i8);
    case DT_U8: PICK(u8);
    case DT_I16: PICK(i16);
    case DT_I32: PICK(i32);
    case DT_I64: PICK(i64);
    default: return NULL;
    }
#undef PICK
}
