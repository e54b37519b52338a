/*
 * test-sha256.c — moe_sha256_*: the FIPS 180-4 example vectors and the
 * million-'a' message, with and without the SHA extensions; both block
 * functions agree on random data fed in odd-sized pieces (so the buffering
 * across update calls is exercised at every offset).
 */
#include "test.h"
#include "moe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void digest_of(const void *data, size_t len, char hex[65])
{
    moe_sha256 ctx;
    uint8_t d[32];
    moe_sha256_init(&ctx);
    moe_sha256_update(&ctx, data, len);
    moe_sha256_final(&ctx, d);
    moe_sha256_hex(d, hex);
}

static void check_vectors(void)
{
    char hex[65];
    digest_of("", 0, hex);
    CHECK_EQ_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    digest_of("abc", 3, hex);
    CHECK_EQ_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    digest_of(two, strlen(two), hex);
    CHECK_EQ_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    digest_of(a, 1000000, hex);
    CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void check_pieces(void)
{
    size_t n = 300000;
    uint8_t *buf = malloc(n);
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    char whole[65], pieces[65];
    digest_of(buf, n, whole);
    moe_sha256 ctx;
    uint8_t d[32];
    moe_sha256_init(&ctx);
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 3 % 1031 + 1)
        moe_sha256_update(&ctx, buf + off, off + step > n ? n - off : step);
    moe_sha256_final(&ctx, d);
    moe_sha256_hex(d, pieces);
    CHECK_EQ_STR(pieces, whole);
    static char first[65];
    if (!first[0])
        memcpy(first, whole, 65);
    CHECK_EQ_STR(whole, first); /* same result on the second (other) path */
    free(buf);
}

int main(void)
{
    bool hw = moe_sha256_use_hw(true);
    fprintf(stderr, "SHA extensions: %s\n", hw ? "yes" : "no");
    check_vectors();
    check_pieces();
    moe_sha256_use_hw(false);
    moe_sha256 ctx;
    moe_sha256_init(&ctx);
    CHECK(ctx.hw == 0);
    check_vectors();
    check_pieces();
    moe_sha256_use_hw(true);
    TEST_DONE();
}
