/*
 * check-crc32c.h - crc32c (src/cache/prefix.c) against its table version,
 * shared by test-prefix (x86: SSE4.2's crc32) and test-kernels-arm (under
 * qemu: ARMv8's CRC32C instructions).  Include after cmocka.
 */
#ifndef INFER_CHECK_CRC32C_H
#define INFER_CHECK_CRC32C_H

#include <stdint.h>

#include "cache/prefix.h"

/* The standard check value, and the hardware path (where the CPU has one)
 * equal to the tables for every length and alignment, and for crcs
 * continued across calls. */
static void check_crc32c(void)
{
    assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(crc32c_sw(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(crc32c(0, "", 0), 0);
    uint8_t buf[300];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof(buf); n += 7) {
            assert_int_equal(crc32c(0, buf + off, n), crc32c_sw(0, buf + off, n));
            const size_t h = n / 3;
            assert_int_equal(crc32c(crc32c(0, buf + off, h), buf + off + h, n - h), crc32c_sw(0, buf + off, n));
        }
}

#endif
