/*
 * t_strerror.c - status strings and version (no server needed).
 */
#include "config.h"

#include <limits.h>
#include <string.h>

#include "testutil.h"

static const int statuses[] = {
    REDISLOCK_OK, REDISLOCK_ERR_INVALID, REDISLOCK_ERR_NOMEM,
    REDISLOCK_ERR_IO, REDISLOCK_ERR_SERVER, REDISLOCK_ERR_PROTOCOL,
    REDISLOCK_ERR_FORKED, REDISLOCK_ERR_LOST, REDISLOCK_ERR_CANCELED,
    REDISLOCK_ERR_NOT_REPLICATED,
};
#define NSTATUS (sizeof statuses / sizeof statuses[0])

static void test_status_values_are_fixed(void **state)
{
    (void)state;
    /* These numbers are ABI: they must never change. */
    assert_int_equal(REDISLOCK_OK, 0);
    assert_int_equal(REDISLOCK_ERR_INVALID, -1);
    assert_int_equal(REDISLOCK_ERR_NOMEM, -2);
    assert_int_equal(REDISLOCK_ERR_IO, -3);
    assert_int_equal(REDISLOCK_ERR_SERVER, -4);
    assert_int_equal(REDISLOCK_ERR_PROTOCOL, -5);
    assert_int_equal(REDISLOCK_ERR_FORKED, -6);
    assert_int_equal(REDISLOCK_ERR_LOST, -7);
    assert_int_equal(REDISLOCK_ERR_CANCELED, -8);
    assert_int_equal(REDISLOCK_ERR_NOT_REPLICATED, -9);
    assert_int_equal(REDISLOCK_STATE_UNKNOWN, 0);
    assert_int_equal(REDISLOCK_STATE_FREE, 1);
    assert_int_equal(REDISLOCK_STATE_OURS, 2);
    assert_int_equal(REDISLOCK_STATE_OTHER, 3);
}

static void test_every_status_has_distinct_text(void **state)
{
    const char *unknown = redislock_strerror(12345);
    size_t i, j;

    (void)state;
    for (i = 0; i < NSTATUS; i++) {
        const char *s = redislock_strerror(statuses[i]);

        assert_non_null(s);
        assert_true(strlen(s) > 0);
        assert_string_not_equal(s, unknown);
        for (j = 0; j < i; j++)
            assert_string_not_equal(s, redislock_strerror(statuses[j]));
    }
}

static void test_unknown_status_text(void **state)
{
    (void)state;
    assert_string_equal(redislock_strerror(1), "unknown redislock status");
    assert_string_equal(redislock_strerror(-10), "unknown redislock status");
    assert_string_equal(redislock_strerror(INT_MIN), "unknown redislock status");
    assert_string_equal(redislock_strerror(INT_MAX), "unknown redislock status");
}

static void test_version_matches_header(void **state)
{
    (void)state;
    assert_string_equal(redislock_version(), REDISLOCK_VERSION_STRING);
    assert_int_equal(REDISLOCK_VERSION_NUMBER,
                     (REDISLOCK_VERSION_MAJOR << 16) |
                     (REDISLOCK_VERSION_MINOR << 8) | REDISLOCK_VERSION_PATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_values_are_fixed),
        cmocka_unit_test(test_every_status_has_distinct_text),
        cmocka_unit_test(test_unknown_status_text),
        cmocka_unit_test(test_version_matches_header),
    };
    return TU_RUN(tests, NULL, NULL);
}
