/* CRC-32 (IEEE, as zlib's crc32: magic 0/1 messages) and CRC-32C (Castagnoli: magic 2 batches) of a byte
 * run, for kproto's compiled records core.  Declared to Cython by _crc.pxd; _crc.c holds the routes.
 *
 * kproto_crc_init() must run once before the others (the compiled modules call it at import): it fills
 * the tables and picks the fastest route this CPU has.  Every route gives the same value; the test-only
 * switches turn the hardware routes off and on so that tests can compare them. */
#ifndef KPROTO_CRC_H
#define KPROTO_CRC_H

#include <stddef.h>
#include <stdint.h>

void kproto_crc_init(void);

/* The finished CRC-32 of p[0..n) (what zlib.crc32(data) returns). */
uint32_t kproto_crc32(const unsigned char *p, size_t n);
/* Whether the carry-less multiply route is in use; setting returns the previous setting, and turning it
 * on where the CPU lacks PCLMULQDQ/SSE4.1 leaves it off. */
int kproto_crc32_clmul_enabled(void);
int kproto_crc32_set_clmul(int enabled);

/* The finished CRC-32C of p[0..n). */
uint32_t kproto_crc32c(const unsigned char *p, size_t n);
/* Whether the CPU has a CRC-32C instruction (SSE4.2 on x86-64, the CRC extension on ARMv8 Linux). */
int kproto_crc32c_hw_available(void);
/* Use it or not; returns the previous setting (on only where available). */
int kproto_crc32c_set_hw(int enabled);

#endif
