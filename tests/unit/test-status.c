/* test-status.c — status names and moe_fail() formatting. */
#include "moe.h"
#include "util.h"
#include "test.h"

int main(void)
{
    moe_err err = {{0}};
    CHECK_EQ_STR(moe_status_str(MOE_OK), "ok");
    CHECK_EQ_STR(moe_status_str(MOE_ERR_FORMAT), "format error");
    CHECK(moe_fail(&err, MOE_ERR_IO, "%s: %d", "file.gguf", 42) == MOE_ERR_IO);
    CHECK_EQ_STR(err.msg, "file.gguf: 42");
    CHECK(moe_fail(NULL, MOE_ERR_RANGE, "x") == MOE_ERR_RANGE);
    /* Long messages are truncated, never overflow. */
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    moe_fail(&err, MOE_ERR_IO, "%s", big);
    CHECK(strlen(err.msg) == MOE_ERR_MSG_SIZE - 1);
    CHECK(moe_version()[0] >= '0' && moe_version()[0] <= '9');
    uint64_t r;
    CHECK(!moe_mul_u64(UINT64_MAX / 2, 3, &r));
    CHECK(moe_mul_u64(1u << 20, 1u << 20, &r) && r == (1ull << 40));
    CHECK(!moe_add_u64(UINT64_MAX, 1, &r));
    TEST_DONE();
}
