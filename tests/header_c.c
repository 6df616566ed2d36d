/*
 * header_c.c - the public header compiles on its own as strict C99
 * (-std=c99 -pedantic) and every prototype is there.  Every exported
 * function must be listed below (tests/check-exports.sh checks the list
 * against src/redislock.sym and the header), so that a function missing
 * from the header or the library fails the build or the check.
 */
#include <redislock.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    /* Take every function's address: a missing prototype fails the build. */
    void (*fns[])(void) = {
        (void (*)(void))redislock_new, (void (*)(void))redislock_new_len,
        (void (*)(void))redislock_free, (void (*)(void))redislock_set_expire,
        (void (*)(void))redislock_acquire, (void (*)(void))redislock_release,
        (void (*)(void))redislock_set_context, (void (*)(void))redislock_id,
        (void (*)(void))redislock_strerror,
        (void (*)(void))redislock_last_error,
        (void (*)(void))redislock_last_error_info,
        (void (*)(void))redislock_version,
        (void (*)(void))redislock_new_counted,
        (void (*)(void))redislock_new_counted_len,
        (void (*)(void))redislock_new_with_id,
        (void (*)(void))redislock_set_id,
        (void (*)(void))redislock_acquire_async,
        (void (*)(void))redislock_acquire_wait_async,
        (void (*)(void))redislock_release_async,
        (void (*)(void))redislock_extend_async,
        (void (*)(void))redislock_held_async,
        (void (*)(void))redislock_inspect_async,
        (void (*)(void))redislock_client_attach,
        (void (*)(void))redislock_client_on_fd,
        (void (*)(void))redislock_client_on_timer,
        (void (*)(void))redislock_set_expire_ms,
        (void (*)(void))redislock_set_fencing,
        (void (*)(void))redislock_set_min_replicas,
        (void (*)(void))redislock_set_min_replicas_aof,
        (void (*)(void))redislock_set_wait_poll_ms,
        (void (*)(void))redislock_token,
        (void (*)(void))redislock_extend,
        (void (*)(void))redislock_held,
        (void (*)(void))redislock_ttl,
        (void (*)(void))redislock_hold_count,
        (void (*)(void))redislock_valid_for_ms,
        (void (*)(void))redislock_last_state,
        (void (*)(void))redislock_acquire_wait,
        (void (*)(void))redislock_set_wakeups,
        (void (*)(void))redislock_client_open,
        (void (*)(void))redislock_client_open_quorum,
        (void (*)(void))redislock_client_new,
        (void (*)(void))redislock_client_free,
        (void (*)(void))redislock_client_set_timeouts,
        (void (*)(void))redislock_client_set_quorum_wait,
        (void (*)(void))redislock_client_set_pool_size,
        (void (*)(void))redislock_client_set_scripts,
        (void (*)(void))redislock_client_ping,
        (void (*)(void))redislock_new_from_client,
        (void (*)(void))redislock_new_counted_from_client,
        (void (*)(void))redislock_new_from_client_len,
        (void (*)(void))redislock_new_counted_from_client_len,
        (void (*)(void))redislock_new_semaphore,
        (void (*)(void))redislock_new_semaphore_len,
        (void (*)(void))redislock_set_autorenew,
        (void (*)(void))redislock_set_lost_callback,
        (void (*)(void))redislock_lost_fd,
        (void (*)(void))redislock_set_max_hold_ms,
        (void (*)(void))redislock_set_heartbeat_ms,
        (void (*)(void))redislock_heartbeat,
        (void (*)(void))redislock_cancel_wait,
        (void (*)(void))redislock_inspect,
        (void (*)(void))redislock_inspect_companions,
        (void (*)(void))redislock_lost_reason,
        (void (*)(void))redislock_lost_reason_text,
        (void (*)(void))redislock_client_stats,
        (void (*)(void))redislock_client_metrics,
        (void (*)(void))redislock_client_set_metrics,
        (void (*)(void))redislock_client_set_metrics_prefix,
        (void (*)(void))redislock_client_set_event_hook,
    };
    size_t i, n = sizeof fns / sizeof fns[0];
    int ok = 1;

    for (i = 0; i < n; i++)
        ok &= fns[i] != NULL;
    printf("1..2\n");
    printf("%s 1 - redislock.h compiles alone as C99 with %u functions\n",
           ok ? "ok" : "not ok", (unsigned)n);
    ok = strcmp(redislock_version(), REDISLOCK_VERSION_STRING) == 0;
    printf("%s 2 - library version %s matches header %s\n", ok ? "ok" : "not ok",
           redislock_version(), REDISLOCK_VERSION_STRING);
    return ok ? 0 : 1;
}
