/* CRC-32 and CRC-32C routes of kproto's compiled records core (see _crc.h for the interface). */
#include "_crc.h"

#include <string.h>
#include <zlib.h>

static uint32_t crc_load_u32le(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Slicing tables of the reflected polynomial poly: tables[0] the byte-wise table, tables[t] a byte followed
 * by t zero bytes (so t + 1 bytes are folded by one lookup in each of t + 1 tables). */
static void crc_build_tables(uint32_t tables[][256], int count, uint32_t poly) {
    uint32_t c;
    int i, k, t;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        tables[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (t = 1; t < count; t++)
            tables[t][i] = (tables[t - 1][i] >> 8) ^ tables[0][tables[t - 1][i] & 0xFF];
}

/* ---- CRC-32 ------------------------------------------------------------------------------------------
 * zlib's crc32 is fast on long buffers but, on a typical x86-64 VM, takes ~200 ns for a 114-byte message
 * (its per-call setup dominates); a slicing-by-16 table loop does that in ~30 ns.  Runs below
 * CRC32_SHORT bytes use the tables, longer ones zlib -- unless the CPU has PCLMULQDQ: then every run of
 * 64 bytes or more goes through kproto_crc_clmul (~4x zlib on long buffers) and only the last <16 bytes
 * through the tables.  tests/test_records_crc.py checks every route against zlib. */
#define CRC32_SHORT 4096
static uint32_t crc32_tables[16][256];
static int crc32_use_clmul;

/* CRC-32 by carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials Using
 * PCLMULQDQ"): 64-byte blocks are folded four lanes at a time, then reduced to 32 bits (Barrett).  Compiled
 * for the pclmul/sse4.1 target only inside this function and used only when the CPU has both. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define KPROTO_HAVE_CLMUL 1
__attribute__((target("pclmul,sse4.1")))
static uint32_t kproto_crc_clmul(uint32_t state, const unsigned char *p, size_t len) {
    /* state: the running (pre-inverted) CRC register; len >= 64 and a multiple of 16 */
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1, x2, x3, x4, x5, x6, x7, x8;
    x1 = _mm_loadu_si128((const __m128i *)(p + 0));
    x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64;
    len -= 64;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
        x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
        x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
        x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
        x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
        x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
        x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)(p + 0)));
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        len -= 64;
    }
    x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
    x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)p);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        p += 16;
        len -= 16;
    }
    /* 128 -> 64 bits */
    x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    /* 64 -> 32 bits */
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction */
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, mask32), poly_mu, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
static int kproto_clmul_probe(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#else
static uint32_t kproto_crc_clmul(uint32_t state, const unsigned char *p, size_t len) { return state; }
static int kproto_clmul_probe(void) { return 0; }
#endif

#define T32(t, v, s) crc32_tables[t][((v) >> (s)) & 0xFF]

static uint32_t crc32_short(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu, a, b, d, e;
    size_t m;
    if (crc32_use_clmul && n >= 64) {
        m = n & ~(size_t)15;
        c = kproto_crc_clmul(c, p, m);
        p += m;
        n -= m;
    }
    while (n >= 16) {
        a = c ^ crc_load_u32le(p);
        b = crc_load_u32le(p + 4);
        d = crc_load_u32le(p + 8);
        e = crc_load_u32le(p + 12);
        c = T32(15, a, 0) ^ T32(14, a, 8) ^ T32(13, a, 16) ^ T32(12, a, 24) ^ T32(11, b, 0) ^ T32(10, b, 8)
            ^ T32(9, b, 16) ^ T32(8, b, 24) ^ T32(7, d, 0) ^ T32(6, d, 8) ^ T32(5, d, 16) ^ T32(4, d, 24)
            ^ T32(3, e, 0) ^ T32(2, e, 8) ^ T32(1, e, 16) ^ T32(0, e, 24);
        p += 16;
        n -= 16;
    }
    /* the tail left by the 16-byte steps, in steps of 8 and 4 bytes: a byte at a time, each step waits
     * for the previous one's table lookup */
    if (n >= 8) {
        a = c ^ crc_load_u32le(p);
        b = crc_load_u32le(p + 4);
        c = T32(7, a, 0) ^ T32(6, a, 8) ^ T32(5, a, 16) ^ T32(4, a, 24) ^ T32(3, b, 0) ^ T32(2, b, 8)
            ^ T32(1, b, 16) ^ T32(0, b, 24);
        p += 8;
        n -= 8;
    }
    if (n >= 4) {
        a = c ^ crc_load_u32le(p);
        c = T32(3, a, 0) ^ T32(2, a, 8) ^ T32(1, a, 16) ^ T32(0, a, 24);
        p += 4;
        n -= 4;
    }
    while (n > 0) {
        c = (c >> 8) ^ crc32_tables[0][(c ^ *p++) & 0xFF];
        n--;
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t kproto_crc32(const unsigned char *p, size_t n) {
    uLong c;
    if (n < CRC32_SHORT || crc32_use_clmul)
        return crc32_short(p, n);
    c = crc32(0L, Z_NULL, 0);
    for (; n > 0x40000000u; n -= 0x40000000u, p += 0x40000000u)
        c = crc32(c, p, 0x40000000u);
    return (uint32_t)crc32(c, p, (uInt)n);
}

int kproto_crc32_clmul_enabled(void) { return crc32_use_clmul; }

int kproto_crc32_set_clmul(int enabled) {
    int previous = crc32_use_clmul;
    crc32_use_clmul = enabled && kproto_clmul_probe();
    return previous;
}

/* ---- CRC-32C -----------------------------------------------------------------------------------------
 * On x86-64 with SSE4.2 the crc32 instruction does 8 bytes per step; on ARMv8 with the CRC extension the
 * __crc32c* intrinsics do the same; elsewhere a slicing-by-8 table.  tests/test_records_crc32c.py checks
 * both against the crc32c package at every boundary length. */
static uint32_t crc32c_tables[8][256];
static int crc32c_use_hw;
#if defined(__GNUC__) && defined(__x86_64__)
#include <nmmintrin.h>
#define KPROTO_CRC32C_HW 1
__attribute__((target("sse4.2")))
static uint32_t kproto_crc32c_hw1(uint32_t state, const unsigned char *p, size_t n) {
    uint64_t c0 = state, v0;
    while (n >= 8) {
        memcpy(&v0, p, 8);
        c0 = _mm_crc32_u64(c0, v0);
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        n--;
    }
    return (uint32_t)c0;
}
/* The crc32 instruction takes 3 cycles and can start one per cycle, so long inputs run as three
   interleaved streams over three adjacent blocks, joined by the identity
   state after (A, B) = zeros(state after A, len B) ^ state of B from 0, where zeros(s, len) -- s carried
   over len zero bytes -- is linear in s: four lookups in tables built at import from 32 basis runs. */
#define KPROTO_CRC_SHORT 256
#define KPROTO_CRC_LONG 4096
static uint32_t kproto_crc32c_short_zeros[4][256], kproto_crc32c_long_zeros[4][256];
static int kproto_crc32c_zeros_ready;
static uint32_t kproto_crc32c_zeros(uint32_t zeros[4][256], uint32_t c) {
    return zeros[0][c & 0xFF] ^ zeros[1][(c >> 8) & 0xFF] ^ zeros[2][(c >> 16) & 0xFF] ^ zeros[3][c >> 24];
}
static void kproto_crc32c_zeros_table(uint32_t zeros[4][256], size_t len) {
    static const unsigned char nothing[KPROTO_CRC_LONG];
    uint32_t basis[32], v;
    int j, k, b;
    for (j = 0; j < 32; j++)
        basis[j] = kproto_crc32c_hw1(1u << j, nothing, len);
    for (k = 0; k < 4; k++)
        for (b = 0; b < 256; b++) {
            for (v = 0, j = 0; j < 8; j++)
                if ((b >> j) & 1)
                    v ^= basis[8 * k + j];
            zeros[k][b] = v;
        }
}
#define KPROTO_CRC_THREE(c0, p, block, zeros)                                        \
    do {                                                                             \
        uint64_t c1 = 0, c2 = 0, v0, v1, v2;                                         \
        const unsigned char *stop = p + block;                                       \
        do {                                                                         \
            memcpy(&v0, p, 8);                                                       \
            memcpy(&v1, p + block, 8);                                               \
            memcpy(&v2, p + 2 * block, 8);                                           \
            c0 = _mm_crc32_u64(c0, v0);                                              \
            c1 = _mm_crc32_u64(c1, v1);                                              \
            c2 = _mm_crc32_u64(c2, v2);                                              \
            p += 8;                                                                  \
        } while (p < stop);                                                          \
        c0 = kproto_crc32c_zeros(zeros, (uint32_t)c0) ^ (uint32_t)c1;                \
        c0 = kproto_crc32c_zeros(zeros, (uint32_t)c0) ^ (uint32_t)c2;                \
        p += 2 * block;                                                              \
    } while (0)
__attribute__((target("sse4.2")))
static uint32_t kproto_crc32c_hw(uint32_t state, const unsigned char *p, size_t n) {
    uint64_t c0 = state;
    if (kproto_crc32c_zeros_ready) {
        for (; n >= 3 * KPROTO_CRC_LONG; n -= 3 * KPROTO_CRC_LONG)
            KPROTO_CRC_THREE(c0, p, KPROTO_CRC_LONG, kproto_crc32c_long_zeros);
        for (; n >= 3 * KPROTO_CRC_SHORT; n -= 3 * KPROTO_CRC_SHORT)
            KPROTO_CRC_THREE(c0, p, KPROTO_CRC_SHORT, kproto_crc32c_short_zeros);
    }
    return kproto_crc32c_hw1((uint32_t)c0, p, n);
}
static int kproto_crc32c_hw_probe(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.2"))
        return 0;
    if (!kproto_crc32c_zeros_ready) {
        kproto_crc32c_zeros_table(kproto_crc32c_short_zeros, KPROTO_CRC_SHORT);
        kproto_crc32c_zeros_table(kproto_crc32c_long_zeros, KPROTO_CRC_LONG);
        kproto_crc32c_zeros_ready = 1;
    }
    return 1;
}
#elif defined(__GNUC__) && defined(__aarch64__) && defined(__linux__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#define KPROTO_CRC32C_HW 1
__attribute__((target("+crc")))
static uint32_t kproto_crc32c_hw(uint32_t state, const unsigned char *p, size_t n) {
    uint64_t v;
    while (n >= 8) {
        memcpy(&v, p, 8);
        state = __crc32cd(state, v);
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        state = __crc32cb(state, *p++);
        n--;
    }
    return state;
}
static int kproto_crc32c_hw_probe(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }
#else
static uint32_t kproto_crc32c_hw(uint32_t state, const unsigned char *p, size_t n) { return state; }
static int kproto_crc32c_hw_probe(void) { return 0; }
#endif

#define T32C(t, v, s) crc32c_tables[t][((v) >> (s)) & 0xFF]

static uint32_t crc32c_table(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu, a, b;
    while (n >= 8) {
        a = c ^ crc_load_u32le(p);
        b = crc_load_u32le(p + 4);
        c = T32C(7, a, 0) ^ T32C(6, a, 8) ^ T32C(5, a, 16) ^ T32C(4, a, 24) ^ T32C(3, b, 0) ^ T32C(2, b, 8)
            ^ T32C(1, b, 16) ^ T32C(0, b, 24);
        p += 8;
        n -= 8;
    }
    while (n > 0) {
        c = (c >> 8) ^ crc32c_tables[0][(c ^ *p++) & 0xFF];
        n--;
    }
    return c ^ 0xFFFFFFFFu;
}

uint32_t kproto_crc32c(const unsigned char *p, size_t n) {
    if (crc32c_use_hw)
        return kproto_crc32c_hw(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
    return crc32c_table(p, n);
}

int kproto_crc32c_hw_available(void) { return kproto_crc32c_hw_probe(); }

int kproto_crc32c_set_hw(int enabled) {
    int previous = crc32c_use_hw;
    crc32c_use_hw = enabled && kproto_crc32c_hw_probe();
    return previous;
}

void kproto_crc_init(void) {
    static int ready;
    if (ready)
        return;
    crc_build_tables(crc32_tables, 16, 0xEDB88320u);
    crc_build_tables(crc32c_tables, 8, 0x82F63B78u);
    crc32_use_clmul = kproto_clmul_probe();
    crc32c_use_hw = kproto_crc32c_hw_probe();
    ready = 1;
}
